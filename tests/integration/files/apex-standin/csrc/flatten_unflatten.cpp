// SPDX-License-Identifier: GPL-3.0-or-later
// Stand-in for Apex's csrc/flatten_unflatten.cpp (tests only): flatten a list of tensors into one, and back.
#include <torch/extension.h>

at::Tensor flatten(std::vector<at::Tensor> tensors) {
    std::vector<at::Tensor> flat;
    for (auto &t : tensors) flat.push_back(t.contiguous().view({-1}));
    return at::cat(flat);
}

std::vector<at::Tensor> unflatten(at::Tensor flat, std::vector<at::Tensor> like) {
    std::vector<at::Tensor> out;
    int64_t offset = 0;
    for (auto &t : like) {
        out.push_back(flat.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
    }
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("flatten", &flatten, "Flatten dense tensors");
    m.def("unflatten", &unflatten, "Unflatten dense tensors");
}
