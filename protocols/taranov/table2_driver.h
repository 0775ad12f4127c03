/* taranov_t2: the measurement / checking driver of `rnicsim table2`
 * (table2_driver.c). */
#ifndef RNICSIM_TARANOV_TABLE2_DRIVER_H
#define RNICSIM_TARANOV_TABLE2_DRIVER_H

int taranov_t2_main(int argc, char **argv);

#endif
