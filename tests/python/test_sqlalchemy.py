"""SQLAlchemy's ORM on litelane.dbapi:
create_engine("sqlite:///file.db", module=litelane.dbapi)."""

import threading

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")  # scripts/test installs it

import litelane.dbapi  # noqa: E402
from sqlalchemy import ForeignKey, String, create_engine, func, select  # noqa: E402
from sqlalchemy.exc import IntegrityError  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship  # noqa: E402


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "author"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50), unique=True)
    books: Mapped[list["Book"]] = relationship(back_populates="author", cascade="all, delete-orphan")


class Book(Base):
    __tablename__ = "book"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(100))
    author_id: Mapped[int] = mapped_column(ForeignKey("author.id"))
    author: Mapped[Author] = relationship(back_populates="books")


@pytest.fixture
def engine(db_path):
    eng = create_engine(f"sqlite:///{db_path}", module=litelane.dbapi)
    Base.metadata.create_all(eng)
    yield eng
    eng.dispose()


def test_orm_create_query_update_delete(engine):
    with Session(engine) as s:
        a = Author(name="Le Guin", books=[Book(title="The Dispossessed"), Book(title="Lathe of Heaven")])
        b = Author(name="Lem", books=[Book(title="Solaris")])
        s.add_all([a, b])
        s.commit()
        assert a.id is not None and all(bk.id for bk in a.books)

    with Session(engine) as s:
        counts = dict(s.execute(select(Author.name, func.count(Book.id)).join(Book).group_by(Author.name)).all())
        assert counts == {"Le Guin": 2, "Lem": 1}
        lem = s.scalars(select(Author).where(Author.name == "Lem")).one()
        lem.books[0].title = "Solaris (1961)"
        s.delete(s.scalars(select(Author).where(Author.name == "Le Guin")).one())
        s.commit()

    with Session(engine) as s:
        assert s.scalars(select(Book.title)).all() == ["Solaris (1961)"]
        assert s.scalar(select(func.count()).select_from(Author)) == 1


def test_orm_rollback_and_integrity_error(engine):
    with Session(engine) as s:
        s.add(Author(name="Dup"))
        s.commit()
        s.add(Author(name="Dup"))
        with pytest.raises(IntegrityError):
            s.commit()
        s.rollback()
        s.add(Author(name="Other"))
        s.flush()
        s.rollback()
        assert s.scalar(select(func.count()).select_from(Author)) == 1


def test_reflection_and_core(engine):
    insp = sqlalchemy.inspect(engine)
    assert set(insp.get_table_names()) == {"author", "book"}
    assert [c["name"] for c in insp.get_columns("book")] == ["id", "title", "author_id"]
    assert insp.get_foreign_keys("book")[0]["referred_table"] == "author"
    with engine.begin() as conn:
        conn.execute(Author.__table__.insert(), [{"name": f"a{i}"} for i in range(100)])
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Author)).scalar() == 100
    # AUTOCOMMIT isolation (pysqlite sets isolation_level=None)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(Author.__table__.insert(), {"name": "auto"})
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Author)).scalar() == 101


def test_orm_from_many_threads(engine):
    errors = []

    def work(i):
        try:
            for k in range(20):
                with Session(engine) as s:
                    author = Author(name=f"t{i}-{k}", books=[Book(title=f"b{i}-{k}-{j}") for j in range(3)])
                    s.add(author)
                    s.commit()
                    s.scalars(select(Book).where(Book.author_id == author.id)).all()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Author)) == 12 * 20
        assert s.scalar(select(func.count()).select_from(Book)) == 12 * 20 * 3
