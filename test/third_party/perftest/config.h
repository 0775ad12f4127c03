/* Stand-in for the config.h perftest 4.5's autotools configure writes,
 * for the tests that build its ib_* programs unmodified as rnicsim
 * plug-ins (test/scenario/test_third_party_perftest.sh).  It says what
 * configure finds on Debian 12 with rdma-core 44's libibverbs-dev,
 * librdmacm-dev and libibumad-dev and without the vendor direct-verbs
 * libraries (mlx5dv, efadv), libpci, CUDA or ROCm: the ibv_wr_* send API,
 * XRC, GID types, raw-Ethernet flow specs, extended device attributes. */
#ifndef RNICSIM_STANDIN_PERFTEST_CONFIG_H
#define RNICSIM_STANDIN_PERFTEST_CONFIG_H

#define VERSION "6.06" /* AC_INIT of perftest 4.5-0.17's configure.ac */
#define HAVE_RAW_ETH_REG 1
#define HAVE_RAW_ETH 1
#define HAVE_XRCD 1
#define HAVE_ENDIAN 1
#define HAVE_IBV_WR_API 1
#define HAVE_GID_TYPE 1
#define HAVE_GID_TYPE_DECLARED 1
#define HAVE_IPV6 1
#define HAVE_IPV4_EXT 1
#define HAVE_SNIFFER 1
#define HAVE_EX 1
#define HAVE_EX_ODP 1
#define HAVE_PACKET_PACING 1

#endif
