/*
** The lane VFS: SQLite's `unix` VFS, with the WAL's WRITER lock behind
** litelane's cross-process fair queue (crates/litelane-sqlite).
**
** In a build with SQLITE_ENABLE_SETLK_TIMEOUT, SQLite asks for the WRITER
** lock (shared-memory lock slot 0, exclusive) with a blocking lock call
** before it takes its read snapshot, after telling the file how long it
** may block (SQLITE_FCNTL_LOCK_TIMEOUT: the connection's busy timeout).
** This VFS waits for a turn of the queue first, up to that timeout, asleep
** and in arrival order, then takes SQLite's own lock behind it: programs
** that bypass the queue (stock SQLite, `vfs=unix`) still exclude each
** other through that lock, and a lane writer polls it for them until its
** timeout. Every other call goes to `unix` unchanged.
**
** Registered as the default VFS by litelane_lane_init(), which the build
** names as SQLITE_EXTRA_INIT (called at the end of sqlite3_initialize()).
** LITELANE_LANE=off in the environment registers it without making it the
** default. `PRAGMA lane` answers whether the database has a queue.
**
** This file is appended to SQLite's amalgamation by scripts/build-lane-sqlite
** (it also compiles on its own, against sqlite3.h). It never changes SQLite's
** own code.
*/
#include "sqlite3.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The queue, in the static library of crates/litelane-sqlite (ffi.rs). */
int litelane_lane_acquire(const char *zDb, void **ppLane, int timeoutMs,
                          void **pTurn, char *zMsg, size_t nMsg);
void litelane_lane_release(void *pTurn);
void litelane_lane_forget(void *pLane);
void litelane_lane_status(const char *zDb, char *zBuf, size_t nBuf);
void litelane_lane_after_fork(void);
int litelane_lane_init(const char *zUnused);

#define LANE_TURN 0
#define LANE_TIMED_OUT 1
#define LANE_OFF 2

/* The WAL's WRITER lock: shared-memory lock slot 0 (wal.c WAL_WRITE_LOCK). */
#define LANE_WRITER_SLOT 0

/* How long a writer that holds the turn sleeps between two tries of SQLite's
** own lock while a process outside the queue holds it: from 1 ms, doubling,
** up to 8 ms (microseconds). */
#define LANE_POLL_FIRST_US 1000
#define LANE_POLL_MAX_US 8000

typedef struct LaneFile LaneFile;
struct LaneFile {
  sqlite3_file base;  /* Base class: pMethods is one of aLaneMethods */
  sqlite3_file *pReal; /* The unix file, just after this struct */
  const char *zDb;     /* Main database file: its full path; else NULL */
  int timeoutMs;       /* The lock timeout SQLite set; <0: no limit */
  void *pTurn;         /* The queue's turn while the WRITER lock is held */
  void *pLane;         /* The database's lane, found at the first write */
};

static sqlite3_vfs *laneUnix = 0;

#define REAL(p) (((LaneFile *)(p))->pReal)

static int laneClose(sqlite3_file *pFile) {
  LaneFile *p = (LaneFile *)pFile;
  int rc = p->pReal->pMethods ? p->pReal->pMethods->xClose(p->pReal) : SQLITE_OK;
  if (p->pTurn) {
    litelane_lane_release(p->pTurn);
    p->pTurn = 0;
  }
  if (p->pLane) {
    litelane_lane_forget(p->pLane);
    p->pLane = 0;
  }
  return rc;
}
static int laneRead(sqlite3_file *f, void *z, int n, sqlite3_int64 o) {
  return REAL(f)->pMethods->xRead(REAL(f), z, n, o);
}
static int laneWrite(sqlite3_file *f, const void *z, int n, sqlite3_int64 o) {
  return REAL(f)->pMethods->xWrite(REAL(f), z, n, o);
}
static int laneTruncate(sqlite3_file *f, sqlite3_int64 size) {
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int laneSync(sqlite3_file *f, int flags) {
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int laneFileSize(sqlite3_file *f, sqlite3_int64 *pSize) {
  return REAL(f)->pMethods->xFileSize(REAL(f), pSize);
}
static int laneLock(sqlite3_file *f, int eLock) {
  return REAL(f)->pMethods->xLock(REAL(f), eLock);
}
static int laneUnlock(sqlite3_file *f, int eLock) {
  return REAL(f)->pMethods->xUnlock(REAL(f), eLock);
}
static int laneCheckReservedLock(sqlite3_file *f, int *pResOut) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), pResOut);
}

static int laneFileControl(sqlite3_file *pFile, int op, void *pArg) {
  LaneFile *p = (LaneFile *)pFile;
  if (op == SQLITE_FCNTL_LOCK_TIMEOUT && pArg) {
    p->timeoutMs = *(int *)pArg;
  } else if (op == SQLITE_FCNTL_PRAGMA && p->zDb) {
    char **azArg = (char **)pArg;
    if (azArg[1] && sqlite3_stricmp(azArg[1], "lane") == 0) {
      char zLine[1024];
      litelane_lane_status(p->zDb, zLine, sizeof(zLine));
      azArg[0] = sqlite3_mprintf("%s", zLine);
      return SQLITE_OK;
    }
  }
  return p->pReal->pMethods->xFileControl(p->pReal, op, pArg);
}
static int laneSectorSize(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int laneDeviceCharacteristics(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int laneShmMap(sqlite3_file *f, int iPg, int pgsz, int bExtend,
                      void volatile **pp) {
  return REAL(f)->pMethods->xShmMap(REAL(f), iPg, pgsz, bExtend, pp);
}
static void laneShmBarrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int laneShmUnmap(sqlite3_file *f, int deleteFlag) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag);
}
static int laneFetch(sqlite3_file *f, sqlite3_int64 o, int n, void **pp) {
  return REAL(f)->pMethods->xFetch(REAL(f), o, n, pp);
}
static int laneUnfetch(sqlite3_file *f, sqlite3_int64 o, void *pPage) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), o, pPage);
}

/* Milliseconds on the unix VFS's clock. */
static sqlite3_int64 laneNowMs(void) {
  sqlite3_int64 t = 0;
  if (laneUnix->iVersion >= 2 && laneUnix->xCurrentTimeInt64) {
    laneUnix->xCurrentTimeInt64(laneUnix, &t);
  } else {
    double d = 0.0;
    laneUnix->xCurrentTime(laneUnix, &d);
    t = (sqlite3_int64)(d * 86400000.0);
  }
  return t;
}

/* SQLite's own WRITER lock, taken while this connection holds the turn:
** a process outside the queue may hold it, so try again until the
** timeout (a writer of the queue never waits here: the turn ahead of it
** released the lock before its turn ended). */
static int laneLockBehindTurn(LaneFile *p, int ofst, int n, int flags) {
  sqlite3_file *r = p->pReal;
  int rc = r->pMethods->xShmLock(r, ofst, n, flags);
  if ((rc & 0xff) == SQLITE_BUSY && p->timeoutMs != 0) {
    sqlite3_int64 deadline =
        p->timeoutMs < 0 ? -1 : laneNowMs() + (sqlite3_int64)p->timeoutMs;
    int us = LANE_POLL_FIRST_US;
    while ((rc & 0xff) == SQLITE_BUSY &&
           (deadline < 0 || laneNowMs() < deadline)) {
      laneUnix->xSleep(laneUnix, us);
      if (us < LANE_POLL_MAX_US) us *= 2;
      rc = r->pMethods->xShmLock(r, ofst, n, flags);
    }
    if ((rc & 0xff) == SQLITE_BUSY) {
      sqlite3_log(SQLITE_BUSY,
                  "lane: the WAL write lock of %s is held by a connection "
                  "outside the queue (stock SQLite or vfs=unix)",
                  p->zDb);
      rc = SQLITE_BUSY_TIMEOUT;
    }
  }
  return rc;
}

static int laneShmLock(sqlite3_file *pFile, int ofst, int n, int flags) {
  LaneFile *p = (LaneFile *)pFile;
  sqlite3_file *r = p->pReal;
  int writer = p->zDb && (flags & SQLITE_SHM_EXCLUSIVE) &&
               ofst <= LANE_WRITER_SLOT && LANE_WRITER_SLOT < ofst + n;
  int rc;
  if (!writer) return r->pMethods->xShmLock(r, ofst, n, flags);
  if (flags & SQLITE_SHM_UNLOCK) {
    rc = r->pMethods->xShmLock(r, ofst, n, flags);
    if (p->pTurn) {
      litelane_lane_release(p->pTurn);
      p->pTurn = 0;
    }
    return rc;
  }
  if (p->pTurn == 0) {
    char zMsg[1024];
    int got = litelane_lane_acquire(p->zDb, &p->pLane, p->timeoutMs,
                                    &p->pTurn, zMsg, sizeof(zMsg));
    if (got == LANE_TIMED_OUT) {
      /* A try without a timeout (a busy handler's retry) fails quietly,
      ** as stock SQLite's does; a timeout that ran out says who held it. */
      if (p->timeoutMs == 0) return SQLITE_BUSY;
      sqlite3_log(SQLITE_BUSY, "lane: %s", zMsg);
      return SQLITE_BUSY_TIMEOUT;
    }
    if (got == LANE_OFF) {
      if (zMsg[0]) sqlite3_log(SQLITE_WARNING, "lane: %s", zMsg);
      return r->pMethods->xShmLock(r, ofst, n, flags);
    }
  }
  rc = laneLockBehindTurn(p, ofst, n, flags);
  if (rc != SQLITE_OK && p->pTurn) {
    litelane_lane_release(p->pTurn);
    p->pTurn = 0;
  }
  return rc;
}

#define LANE_METHODS(v)                                                       \
  {                                                                           \
    v, laneClose, laneRead, laneWrite, laneTruncate, laneSync, laneFileSize,  \
        laneLock, laneUnlock, laneCheckReservedLock, laneFileControl,         \
        laneSectorSize, laneDeviceCharacteristics, laneShmMap, laneShmLock,   \
        laneShmBarrier, laneShmUnmap, laneFetch, laneUnfetch                  \
  }

/* One table per version of the unix file's methods: SQLite looks at
** iVersion before it calls the shared-memory and mmap methods. */
static const sqlite3_io_methods aLaneMethods[3] = {
    LANE_METHODS(1), LANE_METHODS(2), LANE_METHODS(3)};

static int laneOpen(sqlite3_vfs *pVfs, const char *zName, sqlite3_file *pFile,
                    int flags, int *pOutFlags) {
  LaneFile *p = (LaneFile *)pFile;
  int rc;
  (void)pVfs;
  memset(p, 0, sizeof(*p));
  p->pReal = (sqlite3_file *)&p[1];
  rc = laneUnix->xOpen(laneUnix, zName, p->pReal, flags, pOutFlags);
  if (p->pReal->pMethods) {
    int v = p->pReal->pMethods->iVersion;
    p->base.pMethods = &aLaneMethods[(v < 1 ? 1 : v > 3 ? 3 : v) - 1];
    /* SQLite keeps a main database's name valid until xClose. */
    if ((flags & SQLITE_OPEN_MAIN_DB) && zName) p->zDb = zName;
  } else {
    p->base.pMethods = 0;
  }
  return rc;
}

static int laneDelete(sqlite3_vfs *v, const char *z, int syncDir) {
  (void)v;
  return laneUnix->xDelete(laneUnix, z, syncDir);
}
static int laneAccess(sqlite3_vfs *v, const char *z, int flags, int *pOut) {
  (void)v;
  return laneUnix->xAccess(laneUnix, z, flags, pOut);
}
static int laneFullPathname(sqlite3_vfs *v, const char *z, int n, char *zOut) {
  (void)v;
  return laneUnix->xFullPathname(laneUnix, z, n, zOut);
}
static void *laneDlOpen(sqlite3_vfs *v, const char *z) {
  (void)v;
  return laneUnix->xDlOpen(laneUnix, z);
}
static void laneDlError(sqlite3_vfs *v, int n, char *zOut) {
  (void)v;
  laneUnix->xDlError(laneUnix, n, zOut);
}
static void (*laneDlSym(sqlite3_vfs *v, void *h, const char *z))(void) {
  (void)v;
  return laneUnix->xDlSym(laneUnix, h, z);
}
static void laneDlClose(sqlite3_vfs *v, void *h) {
  (void)v;
  laneUnix->xDlClose(laneUnix, h);
}
static int laneRandomness(sqlite3_vfs *v, int n, char *zOut) {
  (void)v;
  return laneUnix->xRandomness(laneUnix, n, zOut);
}
static int laneSleep(sqlite3_vfs *v, int us) {
  (void)v;
  return laneUnix->xSleep(laneUnix, us);
}
static int laneCurrentTime(sqlite3_vfs *v, double *pOut) {
  (void)v;
  return laneUnix->xCurrentTime(laneUnix, pOut);
}
static int laneGetLastError(sqlite3_vfs *v, int n, char *zOut) {
  (void)v;
  return laneUnix->xGetLastError(laneUnix, n, zOut);
}
static int laneCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *pOut) {
  (void)v;
  return laneUnix->xCurrentTimeInt64(laneUnix, pOut);
}
static int laneSetSystemCall(sqlite3_vfs *v, const char *z,
                             sqlite3_syscall_ptr f) {
  (void)v;
  return laneUnix->xSetSystemCall(laneUnix, z, f);
}
static sqlite3_syscall_ptr laneGetSystemCall(sqlite3_vfs *v, const char *z) {
  (void)v;
  return laneUnix->xGetSystemCall(laneUnix, z);
}
static const char *laneNextSystemCall(sqlite3_vfs *v, const char *z) {
  (void)v;
  return laneUnix->xNextSystemCall(laneUnix, z);
}

static sqlite3_vfs laneVfs = {
    3,                    /* iVersion (set from unix's at init) */
    0,                    /* szOsFile (set at init) */
    0,                    /* mxPathname (set at init) */
    0,                    /* pNext */
    "lane",               /* zName */
    0,                    /* pAppData */
    laneOpen,             laneDelete,           laneAccess,
    laneFullPathname,     laneDlOpen,           laneDlError,
    laneDlSym,            laneDlClose,          laneRandomness,
    laneSleep,            laneCurrentTime,      laneGetLastError,
    laneCurrentTimeInt64, laneSetSystemCall,    laneGetSystemCall,
    laneNextSystemCall};

/* Registers the lane VFS (the default one unless LITELANE_LANE=off). Named
** by SQLITE_EXTRA_INIT: runs once, at the end of sqlite3_initialize(). */
int litelane_lane_init(const char *zUnused) {
  const char *zEnv = getenv("LITELANE_LANE");
  int makeDefault = !(zEnv && sqlite3_stricmp(zEnv, "off") == 0);
  (void)zUnused;
  if (laneUnix == 0) {
    laneUnix = sqlite3_vfs_find("unix");
    if (laneUnix == 0) return SQLITE_OK; /* no unix VFS: stock locking */
    laneVfs.iVersion = laneUnix->iVersion < 3 ? laneUnix->iVersion : 3;
    laneVfs.szOsFile = (int)sizeof(LaneFile) + laneUnix->szOsFile;
    laneVfs.mxPathname = laneUnix->mxPathname;
    /* A forked child must not take turns through its parent's open file
    ** descriptions: the queue opens its own after a fork. */
    pthread_atfork(0, 0, litelane_lane_after_fork);
  }
  /* Again after sqlite3_shutdown() and sqlite3_initialize(): the unix VFS
  ** made itself the default again on the way. */
  return sqlite3_vfs_register(&laneVfs, makeDefault);
}
