/* Failure injection for the command-line tests: an LD_PRELOAD library that makes file writes under one
 * folder fail the way a full disk, a read-only mount or an unwritable folder does, so that tests can
 * check what `attnscope` leaves behind (nothing) and what it says (one `error:` line). It works for
 * root too (CI runs as root, which chmod cannot stop) and needs no mount.
 *
 * Environment (read once, at load):
 *   ATTNSCOPE_FAULT_DIR=/abs/folder   faults apply to files in this folder and below (required)
 *   ATTNSCOPE_FAULT=item[,item...]    what fails:
 *     enospc_after=N     the first N bytes written (all files under the folder together) succeed, the
 *                        write that crosses N is short, every later one fails with ENOSPC
 *     enospc_count=K     with enospc_after: only K writes fail, then space is "freed" (writes succeed
 *                        again): a disk that another process fills and empties
 *     deny=ERRNO         creating or opening for writing, mkdir, rename/link into, unlink and
 *                        access(W_OK) under the folder fail with ERRNO (EACCES, EROFS, ...)
 *     deny_access=0      with deny: leave access() alone, so only the open itself fails (a program
 *                        that checks the folder up front gets past the check)
 *     fsync=ERRNO        fsync/fdatasync of any file under the folder fails with ERRNO
 *     rename=ERRNO       rename/renameat/renameat2/link/linkat onto a path under the folder fails
 *   ATTNSCOPE_FAULT_LOG=/file         one line appended per injected failure (outside the folder), so a
 *                                     test can tell that the injection happened
 *
 * What is interposed, and why (checked with strace on the real binary): open/open64/openat/openat64,
 * their _2 fortified forms and creat (HDF5's sec2 driver, Qt's QFile/QSaveFile including its O_TMPFILE
 * + linkat path, the batch's results.jsonl); write/pwrite/pwrite64/writev/pwritev (HDF5 uses pwrite,
 * Qt and libstdc++ write/writev); fsync/fdatasync; rename*, link*, unlink*, mkdir*, access/faccessat.
 * glibc's stdio writes through internal calls that an LD_PRELOAD cannot see, so fopen/fopen64 of a
 * file opened for writing under the folder returns an fopencookie stream whose writes go through the
 * interposed write(); fileno() of such a stream returns the real descriptor (libstdc++'s filebuf uses
 * it). Anything else (mmap'ed writes, sendfile, copy_file_range) is not covered.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FD 65536

static char g_dir[PATH_MAX];          /* realpath of ATTNSCOPE_FAULT_DIR, "" when off */
static size_t g_dir_len;
static char g_log[PATH_MAX];
static long long g_budget = -1;       /* bytes left before ENOSPC; -1: unlimited */
static int g_budget_set = 0;          /* enospc_after given (g_budget changes under g_budget_lock) */
static long long g_fail_left = -1;    /* failing writes left once the budget is spent; -1: all of them */
static pthread_mutex_t g_budget_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_deny = 0, g_deny_access = 1, g_fsync = 0, g_rename = 0;
static atomic_uchar g_tracked[MAX_FD];   /* 1: fd is a file under the folder (2: opened for writing) */

/* ------------------------------------------------------------------------------------ real calls */
#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, ...) static ret (*real_##name)(__VA_ARGS__)
DECLARE_REAL(int, openat, int, const char*, int, ...);
DECLARE_REAL(ssize_t, write, int, const void*, size_t);
DECLARE_REAL(ssize_t, pwrite, int, const void*, size_t, off_t);
DECLARE_REAL(ssize_t, pwrite64, int, const void*, size_t, off64_t);
DECLARE_REAL(ssize_t, writev, int, const struct iovec*, int);
DECLARE_REAL(ssize_t, pwritev, int, const struct iovec*, int, off_t);
DECLARE_REAL(int, close, int);
DECLARE_REAL(int, fsync, int);
DECLARE_REAL(int, fdatasync, int);
DECLARE_REAL(int, rename, const char*, const char*);
DECLARE_REAL(int, renameat, int, const char*, int, const char*);
DECLARE_REAL(int, renameat2, int, const char*, int, const char*, unsigned int);
DECLARE_REAL(int, link, const char*, const char*);
DECLARE_REAL(int, linkat, int, const char*, int, const char*, int);
DECLARE_REAL(int, unlink, const char*);
DECLARE_REAL(int, unlinkat, int, const char*, int);
DECLARE_REAL(int, mkdir, const char*, mode_t);
DECLARE_REAL(int, mkdirat, int, const char*, mode_t);
DECLARE_REAL(int, access, const char*, int);
DECLARE_REAL(int, faccessat, int, const char*, int, int);
DECLARE_REAL(FILE*, fopen, const char*, const char*);
DECLARE_REAL(FILE*, fopen64, const char*, const char*);
DECLARE_REAL(int, fileno, FILE*);
DECLARE_REAL(int, fileno_unlocked, FILE*);

static void* resolve(const char* name)
{
    return dlsym(RTLD_NEXT, name);
}

#define LOAD(name) (real_##name ? (void)0 : (void)(real_##name = resolve(#name)))

/* ---------------------------------------------------------------------------------------- config */
static int errno_from_name(const char* s)
{
    static const struct {
        const char* name;
        int value;
    } names[] = {{"ENOSPC", ENOSPC}, {"EACCES", EACCES}, {"EROFS", EROFS},   {"EIO", EIO},
                 {"EDQUOT", EDQUOT}, {"EPERM", EPERM},   {"EFBIG", EFBIG}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
        if (strncmp(s, names[i].name, strlen(names[i].name)) == 0)
            return names[i].value;
    return atoi(s) > 0 ? atoi(s) : EIO;
}

__attribute__((constructor)) static void fault_init(void)
{
    const char* dir = getenv("ATTNSCOPE_FAULT_DIR");
    const char* spec = getenv("ATTNSCOPE_FAULT");
    const char* log = getenv("ATTNSCOPE_FAULT_LOG");
    if (log && strlen(log) < sizeof g_log)
        strcpy(g_log, log);
    if (!dir || !spec || !*dir)
        return;
    char resolved[PATH_MAX];
    if (!realpath(dir, resolved)) {
        /* The folder may not exist yet (a batch creates its output folder): use the path as given. */
        if (strlen(dir) >= sizeof resolved)
            return;
        strcpy(resolved, dir);
    }
    strcpy(g_dir, resolved);
    g_dir_len = strlen(g_dir);
    while (g_dir_len > 1 && g_dir[g_dir_len - 1] == '/')
        g_dir[--g_dir_len] = '\0';

    const char* p = spec;
    while (*p) {
        if (strncmp(p, "enospc_after=", 13) == 0)
            g_budget = atoll(p + 13), g_budget_set = 1;
        else if (strncmp(p, "enospc_count=", 13) == 0)
            g_fail_left = atoll(p + 13);
        else if (strncmp(p, "deny=", 5) == 0)
            g_deny = errno_from_name(p + 5);
        else if (strncmp(p, "deny_access=", 12) == 0)
            g_deny_access = atoi(p + 12);
        else if (strncmp(p, "fsync=", 6) == 0)
            g_fsync = errno_from_name(p + 6);
        else if (strncmp(p, "rename=", 7) == 0)
            g_rename = errno_from_name(p + 7);
        const char* comma = strchr(p, ',');
        if (!comma)
            break;
        p = comma + 1;
    }
}

static int active(void)
{
    return g_dir_len > 0;
}

/* One line to the log with raw syscalls (never through the interposed functions). */
static void note(const char* what, const char* detail)
{
    if (!g_log[0])
        return;
    char line[PATH_MAX + 128];
    const int n = snprintf(line, sizeof line, "%s %s\n", what, detail ? detail : "");
    const int fd = (int)syscall(SYS_openat, AT_FDCWD, g_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (n > 0)
        (void)!syscall(SYS_write, fd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
    syscall(SYS_close, fd);
}

/* ---------------------------------------------------------------------------------------- paths */
/* Absolute, lexically normalised form of `path` (relative to dirfd), without resolving symlinks in the
 * last component; the folder part is resolved with realpath when it exists. */
static int absolute(int dirfd, const char* path, char* out)
{
    char base[PATH_MAX];
    if (!path)
        return 0;
    if (path[0] == '/') {
        base[0] = '\0';
    } else if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base))
            return 0;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        const ssize_t n = readlink(link, base, sizeof base - 1);
        if (n < 0)
            return 0;
        base[n] = '\0';
    }
    char joined[PATH_MAX * 2];
    if (path[0] == '/')
        snprintf(joined, sizeof joined, "%s", path);
    else
        snprintf(joined, sizeof joined, "%s/%s", base, path);
    /* Split into folder and name; resolve the folder. */
    char* slash = strrchr(joined, '/');
    char folder[PATH_MAX], name[PATH_MAX];
    if (slash == joined) {
        strcpy(folder, "/");
    } else {
        *slash = '\0';
        if (strlen(joined) >= sizeof folder)
            return 0;
        strcpy(folder, joined);
    }
    if (strlen(slash + 1) >= sizeof name)
        return 0;
    strcpy(name, slash + 1);
    char resolved[PATH_MAX];
    if (realpath(folder, resolved))
        strcpy(folder, resolved);
    if (strcmp(name, ".") == 0 || name[0] == '\0')
        snprintf(out, PATH_MAX, "%s", folder);
    else if (strcmp(name, "..") == 0) {
        char* s = strrchr(folder, '/');
        if (s && s != folder)
            *s = '\0';
        snprintf(out, PATH_MAX, "%s", folder);
    } else
        snprintf(out, PATH_MAX, "%s%s%s", folder, strcmp(folder, "/") == 0 ? "" : "/", name);
    return 1;
}

/* True when `path` (relative to dirfd) is the fault folder or lies below it. */
static int under(int dirfd, const char* path)
{
    if (!active() || !path)
        return 0;
    char abs[PATH_MAX];
    if (!absolute(dirfd, path, abs))
        return 0;
    return strncmp(abs, g_dir, g_dir_len) == 0 && (abs[g_dir_len] == '\0' || abs[g_dir_len] == '/');
}

static int writes(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) || (flags & __O_TMPFILE) == __O_TMPFILE;
}

static void track(int fd, int flags)
{
    if (fd >= 0 && fd < MAX_FD)
        atomic_store(&g_tracked[fd], (unsigned char)(writes(flags) ? 2 : 1));
}

static int tracked(int fd)
{
    return fd >= 0 && fd < MAX_FD ? atomic_load(&g_tracked[fd]) : 0;
}

static int fail(int err, const char* what, const char* detail)
{
    note(what, detail);
    errno = err;
    return -1;
}

/* ----------------------------------------------------------------------------------------- opens */
static int do_open(int dirfd, const char* path, int flags, mode_t mode, int (*call)(int, const char*, int, mode_t))
{
    const int in = under(dirfd, path);
    if (in && g_deny && writes(flags))
        return fail(g_deny, "deny-open", path);
    const int fd = call(dirfd, path, flags, mode);
    if (in)
        track(fd, flags);
    return fd;
}

static int call_openat(int dirfd, const char* path, int flags, mode_t mode)
{
    LOAD(openat);
    return REAL(openat)(dirfd, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char* path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(AT_FDCWD, path, flags, mode, call_openat);
}

int open64(const char* path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(AT_FDCWD, path, flags | O_LARGEFILE, mode, call_openat);
}

int openat(int dirfd, const char* path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(dirfd, path, flags, mode, call_openat);
}

int openat64(int dirfd, const char* path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return do_open(dirfd, path, flags | O_LARGEFILE, mode, call_openat);
}

int __open_2(const char* path, int flags) { return do_open(AT_FDCWD, path, flags, 0, call_openat); }
int __open64_2(const char* path, int flags) { return do_open(AT_FDCWD, path, flags | O_LARGEFILE, 0, call_openat); }
int __openat_2(int dirfd, const char* path, int flags) { return do_open(dirfd, path, flags, 0, call_openat); }
int __openat64_2(int dirfd, const char* path, int flags) { return do_open(dirfd, path, flags | O_LARGEFILE, 0, call_openat); }
int creat(const char* path, mode_t mode) { return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode, call_openat); }
int creat64(const char* path, mode_t mode)
{
    return do_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_LARGEFILE, mode, call_openat);
}

int close(int fd)
{
    LOAD(close);
    if (fd >= 0 && fd < MAX_FD)
        atomic_store(&g_tracked[fd], 0);
    return REAL(close)(fd);
}

/* ---------------------------------------------------------------------------------------- writes */
/* How many of `count` bytes may be written to fd now; -1 (errno ENOSPC) when none. */
static ssize_t allowance(int fd, size_t count)
{
    if (!g_budget_set || tracked(fd) != 2 || count == 0)
        return (ssize_t)count;
    pthread_mutex_lock(&g_budget_lock);
    ssize_t allowed;
    if (g_budget < 0) {
        allowed = (ssize_t)count;
    } else if (g_budget == 0 && g_fail_left == 0) {
        g_budget = -1;   /* space was freed */
        allowed = (ssize_t)count;
    } else if (g_budget == 0) {
        allowed = -1;
        if (g_fail_left > 0)
            --g_fail_left;
    } else {
        allowed = (long long)count <= g_budget ? (ssize_t)count : (ssize_t)g_budget;
        g_budget -= allowed;
    }
    pthread_mutex_unlock(&g_budget_lock);
    if (allowed < 0) {
        char detail[64];
        snprintf(detail, sizeof detail, "fd=%d", fd);
        return fail(ENOSPC, "enospc", detail);
    }
    return allowed;
}

ssize_t write(int fd, const void* buf, size_t count)
{
    LOAD(write);
    const ssize_t n = allowance(fd, count);
    if (n < 0)
        return -1;
    return REAL(write)(fd, buf, (size_t)n);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset)
{
    LOAD(pwrite);
    const ssize_t n = allowance(fd, count);
    if (n < 0)
        return -1;
    return REAL(pwrite)(fd, buf, (size_t)n, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off64_t offset)
{
    LOAD(pwrite64);
    const ssize_t n = allowance(fd, count);
    if (n < 0)
        return -1;
    return REAL(pwrite64)(fd, buf, (size_t)n, offset);
}

/* Vectored writes under a budget: write the allowed prefix through write()/pwrite(). */
static ssize_t vector_write(int fd, const struct iovec* iov, int iovcnt, off_t offset, int positioned)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; ++i)
        total += iov[i].iov_len;
    char* flat = malloc(total ? total : 1);
    if (!flat) {
        errno = ENOMEM;
        return -1;
    }
    size_t at = 0;
    for (int i = 0; i < iovcnt; ++i) {
        memcpy(flat + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    const ssize_t n = positioned ? pwrite(fd, flat, total, offset) : write(fd, flat, total);
    const int err = errno;
    free(flat);
    errno = err;
    return n;
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt)
{
    LOAD(writev);
    if (!g_budget_set || tracked(fd) != 2)
        return REAL(writev)(fd, iov, iovcnt);
    return vector_write(fd, iov, iovcnt, 0, 0);
}

ssize_t pwritev(int fd, const struct iovec* iov, int iovcnt, off_t offset)
{
    LOAD(pwritev);
    if (!g_budget_set || tracked(fd) != 2)
        return REAL(pwritev)(fd, iov, iovcnt, offset);
    return vector_write(fd, iov, iovcnt, offset, 1);
}

int fsync(int fd)
{
    LOAD(fsync);
    if (g_fsync && tracked(fd))
        return fail(g_fsync, "fsync", NULL);
    return REAL(fsync)(fd);
}

int fdatasync(int fd)
{
    LOAD(fdatasync);
    if (g_fsync && tracked(fd))
        return fail(g_fsync, "fdatasync", NULL);
    return REAL(fdatasync)(fd);
}

/* --------------------------------------------------------------------------------- names, folders */
static int blocked_target(int dirfd, const char* path)
{
    return under(dirfd, path) && (g_deny || g_rename);
}

int rename(const char* from, const char* to)
{
    LOAD(rename);
    if (blocked_target(AT_FDCWD, to))
        return fail(g_deny ? g_deny : g_rename, "rename", to);
    return REAL(rename)(from, to);
}

int renameat(int fromfd, const char* from, int tofd, const char* to)
{
    LOAD(renameat);
    if (blocked_target(tofd, to))
        return fail(g_deny ? g_deny : g_rename, "renameat", to);
    return REAL(renameat)(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char* from, int tofd, const char* to, unsigned int flags)
{
    LOAD(renameat2);
    if (blocked_target(tofd, to))
        return fail(g_deny ? g_deny : g_rename, "renameat2", to);
    return REAL(renameat2)(fromfd, from, tofd, to, flags);
}

int link(const char* from, const char* to)
{
    LOAD(link);
    if (blocked_target(AT_FDCWD, to))
        return fail(g_deny ? g_deny : g_rename, "link", to);
    return REAL(link)(from, to);
}

int linkat(int fromfd, const char* from, int tofd, const char* to, int flags)
{
    LOAD(linkat);
    if (blocked_target(tofd, to))
        return fail(g_deny ? g_deny : g_rename, "linkat", to);
    return REAL(linkat)(fromfd, from, tofd, to, flags);
}

int unlink(const char* path)
{
    LOAD(unlink);
    if (g_deny && under(AT_FDCWD, path))
        return fail(g_deny, "unlink", path);
    return REAL(unlink)(path);
}

int unlinkat(int dirfd, const char* path, int flags)
{
    LOAD(unlinkat);
    if (g_deny && under(dirfd, path))
        return fail(g_deny, "unlinkat", path);
    return REAL(unlinkat)(dirfd, path, flags);
}

int mkdir(const char* path, mode_t mode)
{
    LOAD(mkdir);
    if (g_deny && under(AT_FDCWD, path))
        return fail(g_deny, "mkdir", path);
    return REAL(mkdir)(path, mode);
}

int mkdirat(int dirfd, const char* path, mode_t mode)
{
    LOAD(mkdirat);
    if (g_deny && under(dirfd, path))
        return fail(g_deny, "mkdirat", path);
    return REAL(mkdirat)(dirfd, path, mode);
}

int access(const char* path, int how)
{
    LOAD(access);
    if (g_deny && g_deny_access && (how & W_OK) && under(AT_FDCWD, path))
        return fail(g_deny, "access", path);
    return REAL(access)(path, how);
}

int faccessat(int dirfd, const char* path, int how, int flags)
{
    LOAD(faccessat);
    if (g_deny && g_deny_access && (how & W_OK) && under(dirfd, path))
        return fail(g_deny, "faccessat", path);
    return REAL(faccessat)(dirfd, path, how, flags);
}

/* ----------------------------------------------------------------------------------------- stdio */
/* A stream opened for writing under the folder: glibc's own stdio would write with internal calls the
 * preload cannot see, so the stream is an fopencookie one over a descriptor from the interposed open(). */
struct Cookie {
    int fd;
};

#define MAX_COOKIES 256
static struct {
    FILE* stream;
    int fd;
} g_cookies[MAX_COOKIES];
static pthread_mutex_t g_cookie_lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t cookie_read(void* c, char* buf, size_t size)
{
    return read(((struct Cookie*)c)->fd, buf, size);
}

static ssize_t cookie_write(void* c, const char* buf, size_t size)
{
    /* glibc takes a short count from a cookie as an error without errno; a real FILE retries until
     * write() fails, so that errno says why (ENOSPC). Do the same. */
    size_t done = 0;
    while (done < size) {
        const ssize_t n = write(((struct Cookie*)c)->fd, buf + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return done > 0 ? (ssize_t)done : -1;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int cookie_seek(void* c, off64_t* offset, int whence)
{
    const off64_t r = lseek64(((struct Cookie*)c)->fd, *offset, whence);
    if (r < 0)
        return -1;
    *offset = r;
    return 0;
}

static int cookie_close(void* c)
{
    struct Cookie* k = c;
    pthread_mutex_lock(&g_cookie_lock);
    for (int i = 0; i < MAX_COOKIES; ++i)
        if (g_cookies[i].stream && g_cookies[i].fd == k->fd)
            g_cookies[i].stream = NULL;
    pthread_mutex_unlock(&g_cookie_lock);
    const int rc = close(k->fd);
    free(k);
    return rc;
}

static FILE* cookie_fopen(const char* path, const char* mode, FILE* (*real)(const char*, const char*))
{
    const int plus = strchr(mode, '+') != NULL;
    int flags;
    if (mode[0] == 'w')
        flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC;
    else if (mode[0] == 'a')
        flags = (plus ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND;
    else if (mode[0] == 'r' && plus)
        flags = O_RDWR;
    else
        return real(path, mode);   /* read-only: nothing to inject */
    if (!under(AT_FDCWD, path))
        return real(path, mode);
    if (strchr(mode, 'x'))
        flags |= O_EXCL;
    if (strchr(mode, 'e'))
        flags |= O_CLOEXEC;
    const int fd = open(path, flags, 0666);
    if (fd < 0)
        return NULL;
    struct Cookie* c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        errno = ENOMEM;
        return NULL;
    }
    c->fd = fd;
    cookie_io_functions_t io = {cookie_read, cookie_write, cookie_seek, cookie_close};
    FILE* f = fopencookie(c, mode, io);
    if (!f) {
        close(fd);
        free(c);
        return NULL;
    }
    pthread_mutex_lock(&g_cookie_lock);
    for (int i = 0; i < MAX_COOKIES; ++i)
        if (!g_cookies[i].stream) {
            g_cookies[i].stream = f;
            g_cookies[i].fd = fd;
            break;
        }
    pthread_mutex_unlock(&g_cookie_lock);
    return f;
}

FILE* fopen(const char* path, const char* mode)
{
    LOAD(fopen);
    if (!active() || !path || !mode)
        return REAL(fopen)(path, mode);
    return cookie_fopen(path, mode, REAL(fopen));
}

FILE* fopen64(const char* path, const char* mode)
{
    LOAD(fopen64);
    if (!active() || !path || !mode)
        return REAL(fopen64)(path, mode);
    return cookie_fopen(path, mode, REAL(fopen64));
}

static int cookie_fd(FILE* f)
{
    int fd = -1;
    pthread_mutex_lock(&g_cookie_lock);
    for (int i = 0; i < MAX_COOKIES; ++i)
        if (g_cookies[i].stream == f)
            fd = g_cookies[i].fd;
    pthread_mutex_unlock(&g_cookie_lock);
    return fd;
}

int fileno(FILE* f)
{
    LOAD(fileno);
    if (active()) {
        const int fd = cookie_fd(f);
        if (fd >= 0)
            return fd;
    }
    return REAL(fileno)(f);
}

int fileno_unlocked(FILE* f)
{
    LOAD(fileno_unlocked);
    if (active()) {
        const int fd = cookie_fd(f);
        if (fd >= 0)
            return fd;
    }
    return REAL(fileno_unlocked)(f);
}
