/* The CUDA SGP kernels for Cl(3,0,1) (algebra id 3): one unit per algebra so they compile in parallel. */
#include "sgp_launch.cuh"

FC_SGP_INSTANTIATE(3)
