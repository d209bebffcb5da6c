// Precompiled header of the extension: the LibTorch headers nearly every source
// includes (ATen's operator declarations alone are most of each file's compile time).
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>
#include <ATen/TensorOperators.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>
#include <torch/library.h>
