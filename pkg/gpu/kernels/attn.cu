// attn.cu: (being written)
#pragma once
#include "common.cuh"
