/* untorn's recorder: an LD_PRELOAD library that logs every write, sync and
 * directory operation a set of processes makes under one directory, so the
 * crash laboratory can rebuild crash images of a real database
 * (src/crashlab/external/, docs/RELIABILITY.md "External systems", the
 * log's format in docs/FORMAT.md "Recorder log").
 *
 *   UNTORN_RECORD_DIR  the directory whose files are recorded (absolute)
 *   UNTORN_RECORD_LOG  the log file records are appended to
 *
 * Each record is one writev() to a file opened O_APPEND: Linux holds the
 * inode's lock for the whole write, so records of concurrent threads and
 * processes never interleave, and no lock of ours is held across fork.
 * Writes and directory operations are logged after they complete, syncs
 * before they start, so the log's order is a safe completion order: a write
 * logged before a sync record finished before that sync began. Each write
 * is also announced (where, how long) before it starts: a process killed
 * between a write and its record leaves the announcement unanswered, and
 * the comparison with the live directory allows those bytes to differ.
 *
 * What it cannot see (the replay's comparison with the live directory
 * reports it as "unrecorded change"): writes through mmap, io_uring and
 * libaio, direct system calls (syscall(2), static binaries), file
 * descriptors opened before the library loaded (inherited across exec),
 * copy_file_range/sendfile/splice into a file. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

enum op {
    OP_OPEN = 1, OP_WRITE = 2, OP_FSYNC = 3, OP_FDATASYNC = 4, OP_SYNCFS = 5,
    OP_SYNC_FILE_RANGE = 6, OP_TRUNCATE = 7, OP_FALLOCATE = 8, OP_RENAME = 9,
    OP_LINK = 10, OP_UNLINK = 11, OP_MKDIR = 12, OP_RMDIR = 13, OP_DUP = 14,
    OP_CLOSE = 15, OP_MARK = 16, OP_SYNC = 17, OP_WRITE_BEGIN = 18
};
/* Record flags. */
#define F_DIRECT 1u  /* the fd was opened O_DIRECT */
#define F_DSYNC 2u   /* O_DSYNC or O_SYNC: the write is durable when it returns */
#define F_DIR 4u     /* the fd or path is a directory */
#define F_CREATED 8u /* open: the file did not exist before the call */

#define MAGIC 0x4c525455u /* "UTRL" */
struct header {
    uint32_t magic, total_len;
    uint16_t op, flags;
    uint32_t pid, tid;
    int32_t fd, result;
    uint64_t time_ns, dev, ino, offset, length;
    uint32_t path_len, path2_len, aux;
} __attribute__((packed));
_Static_assert(sizeof(struct header) == 80, "the log header is 80 bytes (docs/FORMAT.md)");

#define MAX_FDS 65536
/* append: O_APPEND as opened or last set through this fd (a dup sharing the
 * description and changed through another fd is not followed: it only moves
 * an in-flight write's announced offset). */
struct fdinfo { uint64_t dev, ino; uint16_t flags; uint8_t tracked, append; };
static struct fdinfo fds[MAX_FDS];
static char root[PATH_MAX];
static size_t root_len;
static int log_fd = -1;
static int enabled;

#define REAL(ret, name, ...) static ret (*real_##name)(__VA_ARGS__)
REAL(int, open, const char *, int, ...);
REAL(int, open64, const char *, int, ...);
REAL(int, openat, int, const char *, int, ...);
REAL(int, openat64, int, const char *, int, ...);
REAL(int, __open_2, const char *, int);
REAL(int, __open64_2, const char *, int);
REAL(int, __openat_2, int, const char *, int);
REAL(int, __openat64_2, int, const char *, int);
REAL(ssize_t, write, int, const void *, size_t);
REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
REAL(ssize_t, pwrite64, int, const void *, size_t, off_t);
REAL(ssize_t, writev, int, const struct iovec *, int);
REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t);
REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t);
REAL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int);
REAL(ssize_t, pwritev64v2, int, const struct iovec *, int, off_t, int);
REAL(int, fsync, int);
REAL(int, fdatasync, int);
REAL(int, syncfs, int);
REAL(void, sync, void);
REAL(int, sync_file_range, int, off_t, off_t, unsigned int);
REAL(int, ftruncate, int, off_t);
REAL(int, ftruncate64, int, off_t);
REAL(int, fallocate, int, int, off_t, off_t);
REAL(int, fallocate64, int, int, off_t, off_t);
REAL(int, posix_fallocate, int, off_t, off_t);
REAL(int, posix_fallocate64, int, off_t, off_t);
REAL(int, rename, const char *, const char *);
REAL(int, renameat, int, const char *, int, const char *);
REAL(int, renameat2, int, const char *, int, const char *, unsigned int);
REAL(int, link, const char *, const char *);
REAL(int, linkat, int, const char *, int, const char *, int);
REAL(int, unlink, const char *);
REAL(int, unlinkat, int, const char *, int);
REAL(int, mkdir, const char *, mode_t);
REAL(int, mkdirat, int, const char *, mode_t);
REAL(int, rmdir, const char *);
REAL(int, dup, int);
REAL(int, dup2, int, int);
REAL(int, dup3, int, int, int);
REAL(int, fcntl, int, int, ...);
REAL(int, fcntl64, int, int, ...);
REAL(int, close, int);

#define RESOLVE(name) \
    do { if (!real_##name) *(void **)&real_##name = dlsym(RTLD_NEXT, #name); } while (0)

__attribute__((constructor)) static void init(void) {
    RESOLVE(open); RESOLVE(write); RESOLVE(writev); RESOLVE(fcntl);
    const char *dir = getenv("UNTORN_RECORD_DIR"), *log = getenv("UNTORN_RECORD_LOG");
    if (!dir || !log || !realpath(dir, root))
        return;
    root_len = strlen(root);
    int fd = real_open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    /* Far from the low numbers programs close or dup2 onto. */
    log_fd = real_fcntl(fd, F_DUPFD_CLOEXEC, 1000);
    if (log_fd < 0)
        log_fd = fd;
    else {
        RESOLVE(close);
        real_close(fd);
    }
    enabled = 1;
}

static int tracked(int fd) {
    return enabled && fd >= 0 && fd < MAX_FDS && __atomic_load_n(&fds[fd].tracked, __ATOMIC_ACQUIRE);
}

/* Appends one record: header, paths, then the data pieces, in one writev. */
static void emit(struct header *h, const char *p1, const char *p2, const struct iovec *data,
                 int ndata) {
    struct iovec stack[64], *iov = stack;
    int n = 0, cap = ndata + 3;
    if (cap > 64 && !(iov = malloc(sizeof(struct iovec) * cap)))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->magic = MAGIC;
    h->time_ns = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
    h->pid = getpid();
    h->tid = syscall(SYS_gettid);
    h->path_len = p1 ? strlen(p1) : 0;
    h->path2_len = p2 ? strlen(p2) : 0;
    uint64_t total = sizeof *h + h->path_len + h->path2_len;
    iov[n++] = (struct iovec){h, sizeof *h};
    if (h->path_len) iov[n++] = (struct iovec){(void *)p1, h->path_len};
    if (h->path2_len) iov[n++] = (struct iovec){(void *)p2, h->path2_len};
    for (int i = 0; i < ndata; i++) {
        iov[n++] = data[i];
        total += data[i].iov_len;
    }
    h->total_len = (uint32_t)total;
    int saved = errno;
    if (n > IOV_MAX) { /* gather into one buffer: the record stays one write */
        char *buf = malloc(total), *q = buf;
        if (buf) {
            for (int i = 0; i < n; i++) { memcpy(q, iov[i].iov_base, iov[i].iov_len); q += iov[i].iov_len; }
            real_write(log_fd, buf, total);
            free(buf);
        }
    } else
        real_writev(log_fd, iov, n);
    errno = saved;
    if (iov != stack) free(iov);
}

/* The absolute, lexically normalised form of path (relative to dirfd),
 * written relative to the recorded directory into out ("" is the directory
 * itself); 0 if it lies outside. */
static int relative(int dirfd, const char *path, char *out) {
    char abs[PATH_MAX * 2], norm[PATH_MAX * 2];
    if (!enabled || !path) return 0;
    if (path[0] == '/')
        snprintf(abs, sizeof abs, "%s", path);
    else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t k = readlink(link, base, sizeof base - 1);
            if (k < 0) return 0;
            base[k] = 0;
        }
        snprintf(abs, sizeof abs, "%s/%s", base, path);
    }
    size_t len = 0;
    const char *s = abs;
    while (*s) {
        while (*s == '/') s++;
        const char *e = s;
        while (*e && *e != '/') e++;
        size_t k = e - s;
        if (k == 0) break;
        if (k == 1 && s[0] == '.') {
        } else if (k == 2 && s[0] == '.' && s[1] == '.') {
            while (len > 0 && norm[len - 1] != '/') len--;
            if (len > 0) len--;
        } else {
            norm[len++] = '/';
            memcpy(norm + len, s, k);
            len += k;
        }
        s = e;
    }
    norm[len] = 0;
    if (len < root_len || memcmp(norm, root, root_len) != 0 || (norm[root_len] && norm[root_len] != '/'))
        return 0;
    snprintf(out, PATH_MAX, "%s", norm[root_len] ? norm + root_len + 1 : "");
    return 1;
}

static void after_open(int fd, int dirfd, const char *path, int flags, int existed) {
    char rel[PATH_MAX];
    struct stat st;
    if (fd < 0 || fd >= MAX_FDS || !relative(dirfd, path, rel) || fstat(fd, &st) != 0) return;
    uint16_t f = 0;
    if (flags & O_DIRECT) f |= F_DIRECT;
    if (flags & (O_DSYNC | O_SYNC)) f |= F_DSYNC;
    if (S_ISDIR(st.st_mode)) f |= F_DIR;
    fds[fd].dev = st.st_dev;
    fds[fd].ino = st.st_ino;
    fds[fd].flags = f;
    fds[fd].append = (flags & O_APPEND) != 0;
    __atomic_store_n(&fds[fd].tracked, 1, __ATOMIC_RELEASE);
    struct header h = {.op = OP_OPEN, .flags = f | (existed ? 0 : F_CREATED), .fd = fd,
                       .result = fd, .dev = st.st_dev, .ino = st.st_ino,
                       .offset = (uint64_t)st.st_size, .aux = (uint32_t)flags};
    emit(&h, rel, NULL, NULL, 0);
}

/* Whether path exists before an O_CREAT open (to tell a creation). */
static int exists_before(int dirfd, const char *path, int flags) {
    struct stat st;
    char rel[PATH_MAX];
    if (!(flags & O_CREAT) || !relative(dirfd, path, rel)) return 1;
    return fstatat(dirfd, path, &st, 0) == 0;
}

#define OPEN_BODY(callreal, dirfd)                                        \
    mode_t mode = 0;                                                      \
    if (flags & (O_CREAT | O_TMPFILE)) {                                  \
        va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); \
    }                                                                     \
    int existed = exists_before(dirfd, path, flags);                      \
    int fd = callreal;                                                    \
    if (fd >= 0) { int e = errno; after_open(fd, dirfd, path, flags, existed); errno = e; } \
    return fd;

int open(const char *path, int flags, ...) { RESOLVE(open); OPEN_BODY(real_open(path, flags, mode), AT_FDCWD) }
int open64(const char *path, int flags, ...) { RESOLVE(open64); OPEN_BODY(real_open64(path, flags, mode), AT_FDCWD) }
int openat(int d, const char *path, int flags, ...) { RESOLVE(openat); OPEN_BODY(real_openat(d, path, flags, mode), d) }
int openat64(int d, const char *path, int flags, ...) { RESOLVE(openat64); OPEN_BODY(real_openat64(d, path, flags, mode), d) }
int __open_2(const char *path, int flags) { RESOLVE(__open_2); int existed = exists_before(AT_FDCWD, path, flags); int fd = real___open_2(path, flags); if (fd >= 0) { int e = errno; after_open(fd, AT_FDCWD, path, flags, existed); errno = e; } return fd; }
int __open64_2(const char *path, int flags) { RESOLVE(__open64_2); int existed = exists_before(AT_FDCWD, path, flags); int fd = real___open64_2(path, flags); if (fd >= 0) { int e = errno; after_open(fd, AT_FDCWD, path, flags, existed); errno = e; } return fd; }
int __openat_2(int d, const char *path, int flags) { RESOLVE(__openat_2); int existed = exists_before(d, path, flags); int fd = real___openat_2(d, path, flags); if (fd >= 0) { int e = errno; after_open(fd, d, path, flags, existed); errno = e; } return fd; }
int __openat64_2(int d, const char *path, int flags) { RESOLVE(__openat64_2); int existed = exists_before(d, path, flags); int fd = real___openat64_2(d, path, flags); if (fd >= 0) { int e = errno; after_open(fd, d, path, flags, existed); errno = e; } return fd; }
int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

/* A completed write of n bytes at offset off (from the data in iov). */
static void log_write(int fd, const struct iovec *iov, int cnt, ssize_t n, int64_t off) {
    if (n <= 0) return;
    struct iovec stack[64], *d = stack;
    if (cnt > 64 && !(d = malloc(sizeof(struct iovec) * cnt))) return;
    int k = 0;
    size_t left = (size_t)n;
    for (int i = 0; i < cnt && left; i++) {
        size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
        if (take) d[k++] = (struct iovec){iov[i].iov_base, take};
        left -= take;
    }
    struct header h = {.op = OP_WRITE, .flags = fds[fd].flags, .fd = fd, .result = (int32_t)n,
                       .dev = fds[fd].dev, .ino = fds[fd].ino, .offset = (uint64_t)off,
                       .length = (uint64_t)n};
    emit(&h, NULL, NULL, d, k);
    if (d != stack) free(d);
}

/* A write about to start: where and how much, no data. A process killed
 * after the write but before its record leaves this alone at the log's end,
 * and the comparison with the live directory knows those bytes may differ. */
static void log_write_begin(int fd, int64_t off, size_t len) {
    struct header h = {.op = OP_WRITE_BEGIN, .flags = fds[fd].flags, .fd = fd,
                       .dev = fds[fd].dev, .ino = fds[fd].ino, .offset = (uint64_t)off,
                       .length = (uint64_t)len};
    emit(&h, NULL, NULL, NULL, 0);
}

/* Where a write() through the fd's position will start: the position, or
 * the file's end under O_APPEND. */
static int64_t about_to_land(int fd) {
    struct stat st;
    if (fds[fd].append) /* known from open and F_SETFL: no fcntl per write */
        return fstat(fd, &st) == 0 ? (int64_t)st.st_size : -1;
    off_t cur = lseek(fd, 0, SEEK_CUR);
    return cur < 0 ? -1 : (int64_t)cur;
}

static size_t iov_total(const struct iovec *iov, int cnt) {
    size_t t = 0;
    for (int i = 0; i < cnt; i++) t += iov[i].iov_len;
    return t;
}

/* The offset a write() through the fd's position landed at: its position
 * after the write less the bytes written (right for O_APPEND too). */
static int64_t landed(int fd, ssize_t n) {
    off_t end = lseek(fd, 0, SEEK_CUR);
    return end < 0 ? -1 : (int64_t)end - n;
}

ssize_t write(int fd, const void *buf, size_t len) {
    RESOLVE(write);
    if (tracked(fd)) { int e = errno; log_write_begin(fd, about_to_land(fd), len); errno = e; }
    ssize_t n = real_write(fd, buf, len);
    if (n > 0 && tracked(fd)) {
        int e = errno;
        struct iovec v = {(void *)buf, len};
        log_write(fd, &v, 1, n, landed(fd, n));
        errno = e;
    }
    return n;
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    RESOLVE(writev);
    if (tracked(fd)) { int e = errno; log_write_begin(fd, about_to_land(fd), iov_total(iov, cnt)); errno = e; }
    ssize_t n = real_writev(fd, iov, cnt);
    if (n > 0 && tracked(fd)) { int e = errno; log_write(fd, iov, cnt, n, landed(fd, n)); errno = e; }
    return n;
}
#define PWRITE(name, off_t_)                                                       \
    ssize_t name(int fd, const void *buf, size_t len, off_t_ off) {               \
        RESOLVE(name);                                                             \
        if (tracked(fd)) { int e = errno; log_write_begin(fd, off, len); errno = e; } \
        ssize_t n = real_##name(fd, buf, len, off);                               \
        if (n > 0 && tracked(fd)) { int e = errno; struct iovec v = {(void *)buf, len}; \
            log_write(fd, &v, 1, n, off); errno = e; }                             \
        return n;                                                                  \
    }
PWRITE(pwrite, off_t)
PWRITE(pwrite64, off_t)
#define PWRITEV(name, ...)                                                         \
    {                                                                              \
        RESOLVE(name);                                                             \
        if (tracked(fd)) { int e = errno;                                          \
            log_write_begin(fd, off == -1 ? about_to_land(fd) : off, iov_total(iov, cnt)); \
            errno = e; }                                                           \
        ssize_t n = real_##name(fd, iov, cnt, __VA_ARGS__);                        \
        if (n > 0 && tracked(fd)) { int e = errno;                                 \
            log_write(fd, iov, cnt, n, off == -1 ? landed(fd, n) : off); errno = e; } \
        return n;                                                                  \
    }
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) PWRITEV(pwritev, off)
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) PWRITEV(pwritev64, off)
ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl) PWRITEV(pwritev2, off, fl)
ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int fl) PWRITEV(pwritev64v2, off, fl)

/* Syncs: logged before they start. */
static void log_fd_op(int op, int fd, uint64_t off, uint64_t len, uint32_t aux) {
    struct header h = {.op = op, .flags = fds[fd].flags, .fd = fd, .dev = fds[fd].dev,
                       .ino = fds[fd].ino, .offset = off, .length = len, .aux = aux};
    emit(&h, NULL, NULL, NULL, 0);
}
int fsync(int fd) { RESOLVE(fsync); if (tracked(fd)) log_fd_op(OP_FSYNC, fd, 0, 0, 0); return real_fsync(fd); }
int fdatasync(int fd) { RESOLVE(fdatasync); if (tracked(fd)) log_fd_op(OP_FDATASYNC, fd, 0, 0, 0); return real_fdatasync(fd); }
int syncfs(int fd) {
    RESOLVE(syncfs);
    if (enabled) { struct header h = {.op = OP_SYNCFS, .fd = fd}; emit(&h, NULL, NULL, NULL, 0); }
    return real_syncfs(fd);
}
void sync(void) {
    RESOLVE(sync);
    if (enabled) { struct header h = {.op = OP_SYNC, .fd = -1}; emit(&h, NULL, NULL, NULL, 0); }
    real_sync();
}
int sync_file_range(int fd, off_t off, off_t len, unsigned int fl) {
    RESOLVE(sync_file_range);
    if (tracked(fd)) log_fd_op(OP_SYNC_FILE_RANGE, fd, off, len, fl);
    return real_sync_file_range(fd, off, len, fl);
}

/* Size changes: logged after they complete. */
#define SIZE_OP(decl, name, call, op, off, len, aux)                      \
    decl {                                                                \
        RESOLVE(name);                                                    \
        int r = call;                                                     \
        if (r == 0 && tracked(fd)) { int e = errno; log_fd_op(op, fd, off, len, aux); errno = e; } \
        return r;                                                         \
    }
SIZE_OP(int ftruncate(int fd, off_t len), ftruncate, real_ftruncate(fd, len), OP_TRUNCATE, len, 0, 0)
SIZE_OP(int ftruncate64(int fd, off_t len), ftruncate64, real_ftruncate64(fd, len), OP_TRUNCATE, len, 0, 0)
SIZE_OP(int fallocate(int fd, int mode, off_t off, off_t len), fallocate, real_fallocate(fd, mode, off, len), OP_FALLOCATE, off, len, mode)
SIZE_OP(int fallocate64(int fd, int mode, off_t off, off_t len), fallocate64, real_fallocate64(fd, mode, off, len), OP_FALLOCATE, off, len, mode)
SIZE_OP(int posix_fallocate(int fd, off_t off, off_t len), posix_fallocate, real_posix_fallocate(fd, off, len), OP_FALLOCATE, off, len, 0)
SIZE_OP(int posix_fallocate64(int fd, off_t off, off_t len), posix_fallocate64, real_posix_fallocate64(fd, off, len), OP_FALLOCATE, off, len, 0)

/* Directory operations: logged after they complete, when either path lies
 * under the recorded directory (a path outside is logged as "/"-prefixed
 * nothing: a rename in from outside is a creation the replay cannot fill). */
static void log_names(int op, int d1, const char *p1, int d2, const char *p2, uint32_t aux) {
    char r1[PATH_MAX], r2[PATH_MAX];
    int in1 = relative(d1, p1, r1), in2 = p2 ? relative(d2, p2, r2) : 0;
    if (!in1 && !in2) return;
    struct header h = {.op = op, .fd = -1, .aux = aux};
    if (!in1) { h.flags |= 16; r1[0] = 0; } /* source outside */
    if (p2 && !in2) { h.flags |= 32; r2[0] = 0; } /* target outside */
    emit(&h, r1, p2 ? r2 : NULL, NULL, 0);
}
#define NAME_OP(decl, name, call, op, d1, p1, d2, p2, aux)                \
    decl {                                                                \
        RESOLVE(name);                                                    \
        int r = call;                                                     \
        if (r == 0 && enabled) { int e = errno; log_names(op, d1, p1, d2, p2, aux); errno = e; } \
        return r;                                                         \
    }
NAME_OP(int rename(const char *a, const char *b), rename, real_rename(a, b), OP_RENAME, AT_FDCWD, a, AT_FDCWD, b, 0)
NAME_OP(int renameat(int da, const char *a, int db, const char *b), renameat, real_renameat(da, a, db, b), OP_RENAME, da, a, db, b, 0)
NAME_OP(int renameat2(int da, const char *a, int db, const char *b, unsigned int f), renameat2, real_renameat2(da, a, db, b, f), OP_RENAME, da, a, db, b, f)
NAME_OP(int link(const char *a, const char *b), link, real_link(a, b), OP_LINK, AT_FDCWD, a, AT_FDCWD, b, 0)
NAME_OP(int linkat(int da, const char *a, int db, const char *b, int f), linkat, real_linkat(da, a, db, b, f), OP_LINK, da, a, db, b, f)
NAME_OP(int unlink(const char *a), unlink, real_unlink(a), OP_UNLINK, AT_FDCWD, a, 0, NULL, 0)
NAME_OP(int unlinkat(int d, const char *a, int f), unlinkat, real_unlinkat(d, a, f), (f & AT_REMOVEDIR) ? OP_RMDIR : OP_UNLINK, d, a, 0, NULL, f)
NAME_OP(int mkdir(const char *a, mode_t m), mkdir, real_mkdir(a, m), OP_MKDIR, AT_FDCWD, a, 0, NULL, m)
NAME_OP(int mkdirat(int d, const char *a, mode_t m), mkdirat, real_mkdirat(d, a, m), OP_MKDIR, d, a, 0, NULL, m)
NAME_OP(int rmdir(const char *a), rmdir, real_rmdir(a), OP_RMDIR, AT_FDCWD, a, 0, NULL, 0)

/* Descriptors: a duplicate writes to the same file; close ends tracking. */
static int copied(int old, int fd) {
    if (fd >= 0 && fd < MAX_FDS && tracked(old)) {
        int e = errno;
        fds[fd] = fds[old];
        log_fd_op(OP_DUP, old, (uint64_t)fd, 0, 0);
        errno = e;
    } else if (fd >= 0 && fd < MAX_FDS)
        __atomic_store_n(&fds[fd].tracked, 0, __ATOMIC_RELEASE);
    return fd;
}
int dup(int fd) { RESOLVE(dup); return copied(fd, real_dup(fd)); }
int dup2(int fd, int to) { RESOLVE(dup2); return copied(fd, real_dup2(fd, to)); }
int dup3(int fd, int to, int fl) { RESOLVE(dup3); return copied(fd, real_dup3(fd, to, fl)); }
static int fcntl_common(int (*f)(int, int, ...), int fd, int cmd, void *arg) {
    int r = f(fd, cmd, arg);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) copied(fd, r);
    if (cmd == F_SETFL && r == 0 && tracked(fd)) fds[fd].append = ((long)arg & O_APPEND) != 0;
    return r;
}
int fcntl(int fd, int cmd, ...) {
    va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap);
    RESOLVE(fcntl);
    return fcntl_common(real_fcntl, fd, cmd, arg);
}
int fcntl64(int fd, int cmd, ...) {
    va_list ap; va_start(ap, cmd); void *arg = va_arg(ap, void *); va_end(ap);
    RESOLVE(fcntl64);
    return fcntl_common(real_fcntl64 ? real_fcntl64 : real_fcntl, fd, cmd, arg);
}
int close(int fd) {
    RESOLVE(close);
    if (enabled && fd == log_fd) return 0; /* programs that close every fd keep our log */
    if (tracked(fd)) {
        __atomic_store_n(&fds[fd].tracked, 0, __ATOMIC_RELEASE);
        log_fd_op(OP_CLOSE, fd, 0, 0, 0);
    }
    return real_close(fd);
}
