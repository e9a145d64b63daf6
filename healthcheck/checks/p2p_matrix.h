#pragma once
// NVML's P2P status codes (ARCHITECTURE §6) and the matrix as `nvidia-smi topo -p2p r` prints it.
#include <string>
#include <vector>

namespace gpudiag {

using P2pMatrix = std::vector<std::vector<int>>;

// 0 OK, 1 CNS, 2 GNS, 3 TNS, 4 DR, 5 NS, 6 and anything else (a failed query: -1) U.
const char* p2p_code(int status);
const char* p2p_meaning(int status);  // "chipset not supported"
// Rows and columns GPU0..GPUn-1, X on the diagonal.
std::string format_p2p_matrix(const P2pMatrix& m);
// What the codes mean, as nvidia-smi prints it under its matrix.
std::string p2p_legend();

}  // namespace gpudiag
