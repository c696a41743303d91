/* The CUDA SGP kernels for Cl(4,0) (algebra id 4): one unit per algebra so they compile in parallel. */
#include "sgp_launch.cuh"

FC_SGP_INSTANTIATE(4)
