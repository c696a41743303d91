/* The CUDA SGP kernels for Cl(3,0) (algebra id 1): one unit per algebra so they compile in parallel. */
#include "sgp_launch.cuh"

FC_SGP_INSTANTIATE(1)
