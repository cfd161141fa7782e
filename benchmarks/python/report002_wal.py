import concurrent.futures
import os
import random
import sqlite3
import time


def create_table(conn):
    cursor = conn.cursor()
    cursor.execute(
        """CREATE TABLE IF NOT EXISTS test_table
                      (id INTEGER PRIMARY KEY, value TEXT)"""
    )
    conn.commit()


def insert_data(db_file, num_records):
    conn = sqlite3.connect(db_file)
    cursor = conn.cursor()
    for i in range(num_records):
        cursor.execute("INSERT INTO test_table (value) VALUES (?)", (f"Value {i}",))
    conn.commit()
    conn.close()


def read_data(db_file, num_reads):
    conn = sqlite3.connect(db_file)
    cursor = conn.cursor()
    for _ in range(num_reads):
        cursor.execute("SELECT * FROM test_table WHERE id = ?", (random.randint(1, 10000),))
        cursor.fetchone()
    conn.close()


def concurrent_operations(db_file, num_writers, num_readers, records_per_writer, reads_per_reader):
    with concurrent.futures.ThreadPoolExecutor(max_workers=num_writers + num_readers) as executor:
        # Start write operations
        write_futures = [executor.submit(insert_data, db_file, records_per_writer) for _ in range(num_writers)]

        # Start read operations
        read_futures = [executor.submit(read_data, db_file, reads_per_reader) for _ in range(num_readers)]

        # Wait for all operations to complete
        concurrent.futures.wait(write_futures + read_futures)


def run_benchmark(db_file, enable_wal, num_writers, num_readers, records_per_writer, reads_per_reader):
    if os.path.exists(db_file):
        os.remove(db_file)

    conn = sqlite3.connect(db_file)

    if enable_wal:
        conn.execute("PRAGMA journal_mode=WAL")

    create_table(conn)
    conn.close()

    start_time = time.time()
    concurrent_operations(db_file, num_writers, num_readers, records_per_writer, reads_per_reader)
    end_time = time.time()

    total_time = end_time - start_time
    total_writes = num_writers * records_per_writer
    total_reads = num_readers * reads_per_reader

    return total_time, total_writes / total_time, total_reads / total_time


def main():
    num_writers = 12
    num_readers = 40
    records_per_writer = 2000
    reads_per_reader = 1000

    # Run benchmark without WAL
    time_no_wal, writes_no_wal, reads_no_wal = run_benchmark(
        "test_no_wal.db",
        False,
        num_writers,
        num_readers,
        records_per_writer,
        reads_per_reader,
    )

    # Run benchmark with WAL
    time_wal, writes_wal, reads_wal = run_benchmark(
        "test_wal.db",
        True,
        num_writers,
        num_readers,
        records_per_writer,
        reads_per_reader,
    )

    print("Without WAL:")
    print(f"  Total time: {time_no_wal:.2f} seconds")
    print(f"  Writes per second: {writes_no_wal:.2f}")
    print(f"  Reads per second: {reads_no_wal:.2f}")
    print("\nWith WAL:")
    print(f"  Total time: {time_wal:.2f} seconds")
    print(f"  Writes per second: {writes_wal:.2f}")
    print(f"  Reads per second: {reads_wal:.2f}")

    print("\nWAL vs No WAL comparison:")
    print(f"  Total time improvement: {(time_no_wal / time_wal - 1) * 100:.2f}%")
    print(f"  Write speed improvement: {(writes_wal / writes_no_wal - 1) * 100:.2f}%")
    print(f"  Read speed improvement: {(reads_wal / reads_no_wal - 1) * 100:.2f}%")


if __name__ == "__main__":
    main()
