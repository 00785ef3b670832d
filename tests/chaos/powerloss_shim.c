/*
 * A disk with a volatile write cache, for the files of one directory.
 *
 * LD_PRELOAD this into every process that uses the database. For each regular file
 * directly inside $POWERLOSS_DIR (except "*-shm": the wal-index is shared memory,
 * rebuilt from the WAL after a crash, never durable state) it keeps, in
 * $POWERLOSS_STATE:
 *
 *   NAME.durable  the file as of its last completed fsync/fdatasync (the platter);
 *   NAME.log      every write and truncate made since then, in order (the cache):
 *                 records of {u32 kind (1 write, 2 truncate), u32 0, u64 offset or
 *                 new size, u64 length} followed by length bytes of data;
 *   NAME.replay   present while an fsync moves the log into the durable image: a
 *                 crash then completes that fsync (every logged write was issued
 *                 before it, so all of them may be on the platter);
 *   events.log    one line per operation (W write, T truncate, F fsync, U unlink,
 *                 S frozen, see POWERLOSS_FREEZE), to count what a run did.
 *
 * The real files get every write as usual, so the running processes see the OS
 * page cache as they would; only the crash image (built by powerloss.py after a
 * SIGKILL of every process) is the durable image plus a subset of the log. All of
 * this is plain files, so it survives the SIGKILL. A file's first write or truncate
 * under the shim snapshots its current content as durable: whatever was there before
 * the processes started is on the platter.
 *
 * Model limits: writes and truncates through pwrite/pwrite64/write/ftruncate are
 * seen (SQLite's unix VFS writes the database, journal and WAL only with these);
 * writev, mmap writes and O_TRUNC opens of a tracked file are not. Unlinks and file
 * creations count as durable at once (directory entries are not modeled), so
 * directory fsyncs pass through unchanged. A tracked fsync does not reach the real
 * disk: the host does not lose power, and the durable image is the model's platter.
 *
 * One lock (a pthread mutex for the threads of a process, flock on
 * $POWERLOSS_STATE/lock between processes) orders each real write with its log
 * record, so the log's order is the order the page cache saw.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { KIND_WRITE = 1, KIND_TRUNCATE = 2 };

struct record {
    uint32_t kind;
    uint32_t zero;
    uint64_t offset;
    uint64_t length;
};

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off64_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);

static char sim_dir[PATH_MAX];
static char state_dir[PATH_MAX];
static int enabled;
/* POWERLOSS_FREEZE=NAME:K stops the process (SIGSTOP) that makes the K-th write to
 * NAME, counted over all processes, so a cut can land inside a checkpoint: the test
 * kills everything once it sees the "S" event. */
static char freeze_name[256];
static long long freeze_at;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static int lock_fd = -1;
static pid_t lock_pid;

static void fork_prepare(void) { pthread_mutex_lock(&mutex); }
static void fork_release(void) { pthread_mutex_unlock(&mutex); }

static void init(void) {
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_write = dlsym(RTLD_NEXT, "write");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
    const char *dir = getenv("POWERLOSS_DIR");
    const char *state = getenv("POWERLOSS_STATE");
    if (dir && state && realpath(dir, sim_dir) && realpath(state, state_dir)) {
        /* Short roots keep every joined path (root, name up to 200, suffix) in PATH_MAX. */
        enabled = strlen(sim_dir) < 1024 && strlen(state_dir) < 1024;
    }
    const char *freeze = getenv("POWERLOSS_FREEZE");
    const char *colon = freeze ? strrchr(freeze, ':') : NULL;
    if (colon && (size_t)(colon - freeze) < sizeof freeze_name) {
        memcpy(freeze_name, freeze, (size_t)(colon - freeze));
        freeze_at = atoll(colon + 1);
    }
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

static void setup(void) { pthread_once(&once, init); }

static void die(const char *what) {
    char line[512];
    int n = snprintf(line, sizeof line, "powerloss shim: %s: %s\n", what, strerror(errno));
    if (n > 0) real_write(2, line, (size_t)n);
    abort();
}

static void lock(void) {
    pthread_mutex_lock(&mutex);
    pid_t pid = getpid();
    if (lock_fd < 0 || lock_pid != pid) {
        /* A forked child must not share the parent's open file description: flock
         * would then not exclude between them. */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/lock", state_dir);
        lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0) die("open lock");
        lock_pid = pid;
    }
    while (flock(lock_fd, LOCK_EX) != 0) {
        if (errno != EINTR) die("flock");
    }
}

static void unlock(void) {
    flock(lock_fd, LOCK_UN);
    pthread_mutex_unlock(&mutex);
}

/* Is this path a tracked file? Sets name to its base name. */
static int tracked_path(const char *path, char *name) {
    size_t n = strlen(sim_dir);
    if (strncmp(path, sim_dir, n) != 0 || path[n] != '/') return 0;
    const char *base = path + n + 1;
    size_t len = strlen(base);
    if (len == 0 || len > 200 || strchr(base, '/')) return 0;
    if (len >= 4 && strcmp(base + len - 4, "-shm") == 0) return 0;
    /* A descriptor of an unlinked file resolves to "PATH (deleted)": nothing written
     * to it can be found after a crash. */
    if (len >= 10 && strcmp(base + len - 10, " (deleted)") == 0) return 0;
    memcpy(name, base, len + 1);
    return 1;
}

static int tracked_fd(int fd, char *name) {
    if (!enabled) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return tracked_path(path, name);
}

static void state_path(char *out, const char *name, const char *suffix) {
    snprintf(out, PATH_MAX, "%s/%s%s", state_dir, name, suffix);
}

static void write_all(int fd, const void *data, size_t length, off_t offset) {
    const char *p = data;
    while (length > 0) {
        ssize_t n = real_pwrite(fd, p, length, offset);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("write state");
        }
        p += n;
        length -= (size_t)n;
        offset += n;
    }
}

static void event(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void event(const char *format, ...) {
    char line[512], path[PATH_MAX];
    va_list args;
    va_start(args, format);
    int n = vsnprintf(line, sizeof line, format, args);
    va_end(args);
    if (n <= 0 || n >= (int)sizeof line) return;
    snprintf(path, sizeof path, "%s/events.log", state_dir);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("open events");
    if (real_write(fd, line, (size_t)n) != n) die("write events");
    close(fd);
}

/* Make sure NAME.durable exists: the first time, it is the file's current content. */
static void ensure_durable(const char *name) {
    char durable[PATH_MAX], tmp[PATH_MAX], source[PATH_MAX];
    state_path(durable, name, ".durable");
    if (access(durable, F_OK) == 0) return;
    state_path(tmp, name, ".durable.tmp");
    snprintf(source, sizeof source, "%s/%s", sim_dir, name);
    int in = open(source, O_RDONLY | O_CLOEXEC);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) die("open durable");
    if (in >= 0) {
        char buffer[65536];
        off_t at = 0;
        for (;;) {
            ssize_t n = pread(in, buffer, sizeof buffer, at);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die("read source");
            if (n == 0) break;
            write_all(out, buffer, (size_t)n, at);
            at += n;
        }
        close(in);
    }
    close(out);
    if (rename(tmp, durable) != 0) die("rename durable");
}

static void append_record(const char *name, uint32_t kind, uint64_t offset, const void *data,
                          uint64_t length) {
    char path[PATH_MAX];
    state_path(path, name, ".log");
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("open log");
    struct record head = {kind, 0, offset, length};
    struct iovec parts[2] = {{&head, sizeof head}, {(void *)data, (size_t)length}};
    ssize_t want = (ssize_t)(sizeof head + length);
    if (writev(fd, parts, length ? 2 : 1) != want) die("append log");
    close(fd);
}

/* The shared count of writes to the freeze file; called under the lock. */
static long long count_freeze_write(void) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/freeze.count", state_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("open freeze count");
    long long count = 0;
    if (pread(fd, &count, sizeof count, 0) != (ssize_t)sizeof count) count = 0;
    count += 1;
    write_all(fd, &count, sizeof count, 0);
    close(fd);
    return count;
}

static ssize_t tracked_write(int fd, const char *name, const void *buf, size_t count,
                             off_t offset, int positioned) {
    lock();
    ensure_durable(name);
    off_t at = offset;
    ssize_t n;
    if (positioned) {
        n = real_pwrite64(fd, buf, count, offset);
    } else {
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0 && (flags & O_APPEND)) {
            struct stat st;
            at = fstat(fd, &st) == 0 ? st.st_size : 0;
        } else {
            at = lseek(fd, 0, SEEK_CUR);
        }
        n = real_write(fd, buf, count);
    }
    int saved = errno;
    int stop = 0;
    if (n > 0) {
        append_record(name, KIND_WRITE, (uint64_t)at, buf, (uint64_t)n);
        event("W %s %lld %lld\n", name, (long long)at, (long long)n);
        if (freeze_at > 0 && strcmp(name, freeze_name) == 0 && count_freeze_write() == freeze_at) {
            event("S %s %d\n", name, (int)getpid());
            stop = 1;
        }
    }
    unlock();
    if (stop) raise(SIGSTOP);
    errno = saved;
    return n;
}

static int tracked_truncate(int fd, const char *name, off64_t length) {
    lock();
    ensure_durable(name);
    int rc = real_ftruncate64(fd, length);
    int saved = errno;
    if (rc == 0) {
        append_record(name, KIND_TRUNCATE, (uint64_t)length, NULL, 0);
        event("T %s %lld\n", name, (long long)length);
    }
    unlock();
    errno = saved;
    return rc;
}

/* fsync: every write logged so far reaches the durable image. */
static int tracked_sync(const char *name) {
    char durable[PATH_MAX], log_path[PATH_MAX], marker[PATH_MAX];
    lock();
    ensure_durable(name);
    state_path(durable, name, ".durable");
    state_path(log_path, name, ".log");
    state_path(marker, name, ".replay");
    int log_fd = open(log_path, O_RDWR | O_CLOEXEC);
    if (log_fd >= 0) {
        int mark = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (mark < 0) die("open replay marker");
        close(mark);
        int out = open(durable, O_WRONLY | O_CLOEXEC);
        if (out < 0) die("open durable for replay");
        off_t at = 0;
        struct record head;
        char *data = NULL;
        size_t capacity = 0;
        for (;;) {
            ssize_t n = pread(log_fd, &head, sizeof head, at);
            if (n == 0) break;
            if (n != (ssize_t)sizeof head) die("read log record");
            at += n;
            if (head.kind == KIND_TRUNCATE) {
                if (real_ftruncate64(out, (off64_t)head.offset) != 0) die("truncate durable");
                continue;
            }
            if (head.length > capacity) {
                free(data);
                capacity = head.length;
                data = malloc(capacity);
                if (!data) die("malloc");
            }
            if (pread(log_fd, data, head.length, at) != (ssize_t)head.length) die("read log data");
            at += (off_t)head.length;
            write_all(out, data, head.length, (off_t)head.offset);
        }
        free(data);
        close(out);
        if (real_ftruncate64(log_fd, 0) != 0) die("clear log");
        close(log_fd);
        if (real_unlink(marker) != 0) die("remove replay marker");
    }
    event("F %s\n", name);
    unlock();
    return 0;
}

static int forget(const char *name) {
    static const char *suffixes[] = {".durable", ".log", ".replay"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        state_path(path, name, suffixes[i]);
        if (real_unlink(path) != 0 && errno != ENOENT) die("forget state");
    }
    event("U %s\n", name);
    return 0;
}

static int resolve(int dirfd, const char *path, char *out) {
    char joined[PATH_MAX], dir[PATH_MAX];
    if (path[0] == '/') {
        snprintf(joined, sizeof joined, "%s", path);
    } else if (dirfd == AT_FDCWD) {
        if (!getcwd(dir, sizeof dir)) return 0;
        snprintf(joined, sizeof joined, "%s/%s", dir, path);
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, dir, sizeof dir - 1);
        if (n <= 0) return 0;
        dir[n] = 0;
        snprintf(joined, sizeof joined, "%s/%s", dir, path);
    }
    /* The directory part is resolved; the last part is the name as given. */
    char *slash = strrchr(joined, '/');
    *slash = 0;
    if (!realpath(joined[0] ? joined : "/", dir)) return 0;
    snprintf(out, PATH_MAX, "%s/%s", dir, slash + 1);
    return 1;
}

static int unlink_tracked(int dirfd, const char *path, int flags) {
    char full[PATH_MAX], name[PATH_MAX];
    int tracked = enabled && !(flags & AT_REMOVEDIR) && resolve(dirfd, path, full) &&
                  tracked_path(full, name);
    if (!tracked) return real_unlinkat(dirfd, path, flags);
    lock();
    int rc = real_unlinkat(dirfd, path, flags);
    int saved = errno;
    if (rc == 0) forget(name);
    unlock();
    errno = saved;
    return rc;
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_pwrite64(fd, buf, count, offset);
    return tracked_write(fd, name, buf, count, offset, 1);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_pwrite(fd, buf, count, offset);
    return tracked_write(fd, name, buf, count, offset, 1);
}

ssize_t write(int fd, const void *buf, size_t count) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_write(fd, buf, count);
    return tracked_write(fd, name, buf, count, 0, 0);
}

int ftruncate64(int fd, off64_t length) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_ftruncate64(fd, length);
    return tracked_truncate(fd, name, length);
}

int ftruncate(int fd, off_t length) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_ftruncate(fd, length);
    return tracked_truncate(fd, name, length);
}

int fsync(int fd) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_fsync(fd);
    return tracked_sync(name);
}

int fdatasync(int fd) {
    setup();
    char name[PATH_MAX];
    if (!tracked_fd(fd, name)) return real_fdatasync(fd);
    return tracked_sync(name);
}

int unlink(const char *path) {
    setup();
    return unlink_tracked(AT_FDCWD, path, 0);
}

int unlinkat(int dirfd, const char *path, int flags) {
    setup();
    return unlink_tracked(dirfd, path, flags);
}
