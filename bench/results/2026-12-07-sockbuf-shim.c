/*
 * Experiment of 2026-12-07 (bench/README.md, "Where it stands"): an
 * LD_PRELOAD shim that sets SO_SNDBUF and SO_RCVBUF to $HGM_SOCKBUF on
 * every TCP socket QEMU creates, to bound the backlog of the main
 * channel.  gcc -O2 -shared -fPIC -o sockbuf.so sockbuf.c -ldl; a
 * "build" for --builds is a script that execs QEMU with it preloaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <netinet/in.h>

static void setbuf_fd(int fd)
{
    const char *v = getenv("HGM_SOCKBUF");
    int n;

    if (fd < 0 || !v) {
        return;
    }
    n = atoi(v);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof(n));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof(n));
}

int socket(int domain, int type, int protocol)
{
    static int (*real)(int, int, int);
    int fd;

    if (!real) {
        real = dlsym(RTLD_NEXT, "socket");
    }
    fd = real(domain, type, protocol);
    if ((domain == AF_INET || domain == AF_INET6) &&
        (type & 0xf) == SOCK_STREAM) {
        setbuf_fd(fd);
    }
    return fd;
}
