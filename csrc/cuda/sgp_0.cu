/* The CUDA SGP kernels for Cl(2,0) (algebra id 0): one unit per algebra so they compile in parallel. */
#include "sgp_launch.cuh"

FC_SGP_INSTANTIATE(0)
