/* rnicsimd: the emulation-mode daemon (emu/daemon/main.c does the work;
 * `rnicsim emulate` is the same daemon in the foreground). */
#include "emu/daemon/emu.h"

int main(int argc, char **argv)
{
    return emulate_main(argv[0], argc - 1, argv + 1);
}
