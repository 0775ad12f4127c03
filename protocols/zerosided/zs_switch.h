/* The zero-sided programs (docs/zero-sided.md): the switch program's
 * control plane (runs on the programmable switch's CPU, host sw0) and the
 * processing units (producer / consumer / echo PUs on the hosts). */
#ifndef RNICSIM_ZS_SWITCH_H
#define RNICSIM_ZS_SWITCH_H

int zs_switch_main(int argc, char **argv);
int zs_pu_main(int argc, char **argv);
/* baselines */
int zs_cpudrv_main(int argc, char **argv);
int zs_nvshmem_main(int argc, char **argv);
int zs_cpushuffle_main(int argc, char **argv);
int zs_dfirepl_main(int argc, char **argv);

#endif
