/* The CUDA SGP kernels for Cl(1,3) (algebra id 2): one unit per algebra so they compile in parallel. */
#include "sgp_launch.cuh"

FC_SGP_INSTANTIATE(2)
