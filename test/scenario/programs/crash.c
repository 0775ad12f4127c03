/* A program that fails, for test_posix_failures.sh:
 *   crash segv     print a line, then write through a NULL pointer
 *   crash abort    print a line, then fail an assert
 *   crash overflow recurse until the stack overflows
 *   crash spin     loop forever changing a register (the watchdog's case)
 *   crash wait     wait forever for memory nobody writes (a pure spin)
 *   crash refuse   fork, a real address, a name there is no DNS for, a read
 *                  of a pipe that never gets data: each refused, status 0 */
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile int *volatile null_ptr;
static volatile int flag;

__attribute__((noinline)) static void crash_here(void)
{
    *null_ptr = 42;
}

#pragma GCC diagnostic ignored "-Winfinite-recursion"
__attribute__((noinline)) static int recurse(int n)
{
    volatile char pad[512];
    pad[0] = (char)n;
    return recurse(n + 1) + pad[0];
}

/* computes forever: its registers change at every turn */
__attribute__((noinline)) static unsigned long spin_here(void)
{
    unsigned long n = 1;
    while (n != 0)
        n = n * 3 + 2 + (unsigned long)flag;
    return n;
}

__attribute__((noinline)) static void wait_here(void)
{
    while (!flag) {
    }
}

static int refuse(void)
{
    int ok = 1;
    if (fork() != -1 || errno != ENOSYS)
        ok = 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
    a.sin_addr.s_addr = htonl(0x08080808); /* 8.8.8.8 */
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) != -1 || errno != ENETUNREACH)
        ok = 0;
    close(s);
    struct addrinfo *res;
    if (getaddrinfo("www.example.com", "80", NULL, &res) != EAI_NONAME)
        ok = 0;
    int p[2];
    if (pipe(p) == 0) {
        char c;
        if (read(p[0], &c, 1) != -1 || errno != EAGAIN)
            ok = 0;
        close(p[0]);
        close(p[1]);
    }
    printf("refusals %s\n", ok ? "as expected" : "WRONG");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    printf("%s: before the failure\n", what);
    if (!strcmp(what, "segv"))
        crash_here();
    else if (!strcmp(what, "abort"))
        assert(flag == 1);
    else if (!strcmp(what, "overflow"))
        return recurse(0);
    else if (!strcmp(what, "spin"))
        return (int)spin_here();
    else if (!strcmp(what, "wait"))
        wait_here();
    else if (!strcmp(what, "refuse"))
        return refuse();
    return 3;
}
