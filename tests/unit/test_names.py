"""Tests for kerneltui.trace.names (kernel-name normalization, doc section 5).

The full names below are copied verbatim from the shared Kineto traces
(``cat`` in kernel / gpu_memcpy / gpu_memset), so a regression in the rules
shows exactly which name changed.
"""

from __future__ import annotations

import ast
import gzip
import time
from pathlib import Path

import pytest

from kerneltui.trace.names import short_name, short_names
from tests.conftest import SHARED_TRACES as TRACES

GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})

# Distinct GPU event names over every trace in tests/data/traces (the doc's
# section 5 says 107; the 15 traces hold 217: 214 kernels, 2 memcpy, 1 memset).
CORPUS_DISTINCT = 217

# std::plus (gpt_train_eager, AdamW's _foreach_add_) and std::multiplies
# (resnet18_train_*, SGD's _foreach_mul_) are the only difference between these
# two: the std functional is kept in the key.
PLUS_SCALAR = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, "
    "at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>, float>"
    "(at::native::(anonymous namespace)::TensorListMetadata<1>, "
    "at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::plus<float>, float)"
)
MULTIPLIES_SCALAR = PLUS_SCALAR.replace("std::plus<float>", "std::multiplies<float>")

# Display cap for names the rules shorten. With the 13 traces before ResNet-18
# the longest such name was 63 characters; 80 leaves room for longer functor
# names and still fits a kernel column beside count/time/% columns in a
# 120-column terminal. The ResNet-18 traces have 3 rule-shortened names over it
# (KNOWN_SHORTENED_OVER_CAP, the xfail below).
# Names passed through unchanged (flat library names) are never cut: those
# over the cap are listed here, so a new one shows up as a failure, not as a
# silently truncated name.
SHORT_CAP = 80
KNOWN_OVER_CAP = frozenset(
    {
        # 2, 101 characters: flat cuDNN SDPA kernel names (gpt_train_eager).
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
        # 17, 142-152 characters: flat cuDNN implicit-GEMM convolution kernels (resnet18_train_*).
        "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x64x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x64x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_g1_strided_execute_kernel__5x_cudnn",
        "sm90_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_strided_execute_kernel__5x_cudnn",
        "sm90_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x64x64_warpgroupsize1x1x1_g1_strided_execute_kernel__5x_cudnn",
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x128x64_warpgroupsize2x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize256x64x32_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x64x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn",
        "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_warpgroupsize1x1x1_g1_execute_split_k_kernel__5x_cudnn",
        # 2, 1623-1676 characters: mangled CUTLASS convolution kernels, no demangled form in the trace (resnet18_train_*).
        "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi64ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11MatrixShapeILi64ELi32EEENS_10bfloat16_tENS_9transform29PitchLinearWarpRakedThreadMapINS_16PitchLinearShapeILi64ELi32EEELi128ENSF_ILi8ELi4EEELi8EEENS_12AlignedArrayISC_Li8ELi16EEEEENSD_11threadblock25RegularTileAccessIteratorISB_SC_NS_6layout40ColumnMajorTensorOpMultiplicandCongruousILi16ELi64EEELi1ESI_Li16EEELNS_4arch14CacheOperation4KindE0ENS4_48Conv2dWgradActivationTileAccessIteratorOptimizedINSA_ILi32ELi128EEESC_NSE_INSF_ILi128ELi32EEELi128ESH_Li8EEESK_EENSN_ISW_SC_NSO_37RowMajorTensorOpMultiplicandCongruousILi16ELi64EEELi0ESY_Li16EEELSU_0ENS6_11threadblock9MmaPolicyINS6_4warp11MmaTensorOpINS7_ILi32ELi64ELi32EEESC_SQ_SC_S11_fNSO_8RowMajorENS15_17MmaTensorOpPolicyINSS_3MmaINS7_ILi16ELi8ELi16EEELi32ESC_S18_SC_NSO_11ColumnMajorEfS18_NSS_13OpMultiplyAddEEENSA_ILi1ELi1EEEEELi1ELb0EbEENSA_ILi0ELi0EEES1I_Li1EEELi6EbEENS_8epilogue11threadblock8EpilogueIS8_S1H_Li1ENS1M_22PredicatedTileIteratorINS1M_26OutputTileOptimalThreadMapINS1M_15OutputTileShapeILi128ELi8ELi2ELi1ELi1EEENS1Q_ILi1ELi4ELi1ELi1ELi4EEELi128ELi4ELi32EEEfLb0ENSO_9NoPermuteELb0EEENS1L_4warp24FragmentIteratorTensorOpIS17_S1B_fNS_5ArrayIfLi4ELb1EEES18_EENS1W_20TileIteratorTensorOpIS17_S1B_fS18_EENS1M_18SharedLoadIteratorINS1T_18CompactedThreadMapEfLi16EEENS1L_6thread17LinearCombinationIfLi4EffLNS26_9ScaleType4KindE0ELNS_15FloatRoundStyleE2EEENSA_ILi0ELi8EEELi2ELi1EEENS13_30GemmIdentityThreadblockSwizzleILi4EEELNS1_8OperatorE2ENS1_17Conv2dProblemSizeELNS1_9GroupModeE0EEEEEvNT_6ParamsE",
        "_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi64ELi64ELi64EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11MatrixShapeILi64ELi64EEENS_10bfloat16_tENS_9transform29PitchLinearWarpRakedThreadMapINS_16PitchLinearShapeILi64ELi64EEELi128ENSF_ILi8ELi4EEELi8EEENS_12AlignedArrayISC_Li8ELi16EEEEENSD_11threadblock25RegularTileAccessIteratorISB_SC_NS_6layout40ColumnMajorTensorOpMultiplicandCongruousILi16ELi64EEELi1ESI_Li16EEELNS_4arch14CacheOperation4KindE0ENS4_48Conv2dWgradActivationTileAccessIteratorOptimizedISB_SC_SI_SK_EENSN_ISB_SC_NSO_37RowMajorTensorOpMultiplicandCongruousILi16ELi64EEELi0ESI_Li16EEELSU_0ENS6_11threadblock9MmaPolicyINS6_4warp11MmaTensorOpINS7_ILi32ELi32ELi64EEESC_SQ_SC_SY_fNSO_8RowMajorENS12_17MmaTensorOpPolicyINSS_3MmaINS7_ILi16ELi8ELi16EEELi32ESC_S15_SC_NSO_11ColumnMajorEfS15_NSS_13OpMultiplyAddEEENSA_ILi1ELi1EEEEELi1ELb0EbEENSA_ILi0ELi0EEES1F_Li1EEELi5EbEENS_8epilogue11threadblock8EpilogueIS8_S1E_Li1ENS1J_22PredicatedTileIteratorINS1J_26OutputTileOptimalThreadMapINS1J_15OutputTileShapeILi64ELi8ELi2ELi1ELi1EEENS1N_ILi1ELi4ELi1ELi1ELi4EEELi128ELi4ELi32EEEfLb0ENSO_9NoPermuteELb0EEENS1I_4warp24FragmentIteratorTensorOpIS14_S18_fNS_5ArrayIfLi4ELb1EEES15_EENS1T_20TileIteratorTensorOpIS14_S18_fS15_EENS1J_18SharedLoadIteratorINS1Q_18CompactedThreadMapEfLi16EEENS1I_6thread17LinearCombinationIfLi4EffLNS23_9ScaleType4KindE0ELNS_15FloatRoundStyleE2EEENSA_ILi0ELi8EEELi2ELi1EEENS10_30GemmIdentityThreadblockSwizzleILi4EEELNS1_8OperatorE2ENS1_17Conv2dProblemSizeELNS1_9GroupModeE0EEEEEvNT_6ParamsE",
        # 33, 82-147 characters: Triton kernels named after everything they fuse (resnet18_train_compiled).
        "triton_per_fused__native_batch_norm_legit_functional_add_mean_relu_threshold_backward_36",
        "triton_per_fused__native_batch_norm_legit_functional_add_native_batch_norm_backward_threshold_backward_12",
        "triton_per_fused__native_batch_norm_legit_functional_as_strided_div_expand_native_batch_norm_backward_threshold_backward_4",
        "triton_per_fused_as_strided_div_expand_native_batch_norm_backward_threshold_backward_3",
        "triton_poi_fused__native_batch_norm_legit_functional_add_as_strided_convolution_backward_div_expand_native_batch_norm_backward_threshold_backward_9",
        "triton_poi_fused__native_batch_norm_legit_functional_add_convolution_backward_native_batch_norm_backward_threshold_backward_13",
        "triton_poi_fused__native_batch_norm_legit_functional_add_convolution_backward_native_batch_norm_backward_threshold_backward_22",
        "triton_poi_fused__native_batch_norm_legit_functional_add_convolution_backward_native_batch_norm_backward_threshold_backward_31",
        "triton_poi_fused__native_batch_norm_legit_functional_as_strided_convolution_backward_div_expand_native_batch_norm_backward_threshold_backward_5",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_18",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_27",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_36",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_threshold_backward_15",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_threshold_backward_24",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_threshold_backward_33",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_threshold_backward_42",
        "triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_native_batch_norm_backward_threshold_backward_7",
        "triton_red_fused__native_batch_norm_legit_functional_add_as_strided_div_expand_native_batch_norm_backward_threshold_backward_8",
        "triton_red_fused__native_batch_norm_legit_functional_add_native_batch_norm_backward_threshold_backward_10",
        "triton_red_fused__native_batch_norm_legit_functional_add_native_batch_norm_backward_threshold_backward_19",
        "triton_red_fused__native_batch_norm_legit_functional_add_native_batch_norm_backward_threshold_backward_21",
        "triton_red_fused__native_batch_norm_legit_functional_add_native_batch_norm_backward_threshold_backward_28",
        "triton_red_fused__native_batch_norm_legit_functional_add_native_batch_norm_backward_threshold_backward_30",
        "triton_red_fused__native_batch_norm_legit_functional_as_strided_div_expand_native_batch_norm_backward_threshold_backward_2",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_17",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_26",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_35",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_threshold_backward_14",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_threshold_backward_23",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_threshold_backward_32",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_threshold_backward_39",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_threshold_backward_41",
        "triton_red_fused__native_batch_norm_legit_functional_native_batch_norm_backward_threshold_backward_6",
    }
)
KNOWN_SHORTENED_OVER_CAP = frozenset(
    {
        # cuDNN's CUTLASS kernels: the flat config name is the template argument (resnet18_train_*).
        "Kernel<cutlass_tensorop_bf16_s16816dgrad_optimized_bf16_128x128_32x5_nhwc_unity_stride_align8>",  # 94
        "Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align8>",  # 81
        # batch-norm statistics update in f64 (resnet18_train_eager).
        "unrolled_elementwise_kernel_for_multi_outputs<batch_norm_update_stats_and_invert>[f64]",  # 86
    }
)

# (full name, short name): representative pairs from the real traces.
# The first four are the doc's table; then pass-through names (Triton, nvjet,
# memcpy/memset, cuDNN), then ATen/cub kernels of each shape seen.
TABLE: list[tuple[str, str]] = [
    (
        'void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)',
        'vectorized_elementwise_kernel<CUDAFunctor_add>[f32]',
    ),
    (
        'void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)',
        'vectorized_elementwise_kernel<launch_clamp_scalar>[f32]',
    ),
    (
        'void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)',
        'vectorized_elementwise_kernel<MulFunctor,scalar>[f32]',
    ),
    (
        'void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)',
        'vectorized_elementwise_kernel<MulFunctor>[f32]',
    ),
    (
        'triton_poi_fused_add_relu_0',
        'triton_poi_fused_add_relu_0',
    ),
    (
        'nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT',
        'nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT',
    ),
    (
        'Memcpy HtoD (Pinned -> Device)',
        'Memcpy HtoD (Pinned -> Device)',
    ),
    (
        'Memset (Device)',
        'Memset (Device)',
    ),
    (
        'void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)',
        'vectorized_elementwise_kernel<CUDAFunctor_add>[bf16]',
    ),
    (
        'void at::native::vectorized_elementwise_kernel<8, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)',
        'vectorized_elementwise_kernel<GeluBackwardCUDAKernelImpl>[bf16]',
    ),
    (
        'void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> > const&)::{lambda(int)#1})',
        'elementwise_kernel<DivFunctor>[f32]',
    ),
    (
        'void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>, 4, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, at::native::memory::StoreWithCast<1> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, at::native::memory::StoreWithCast<1>)',
        'unrolled_elementwise_kernel<CUDAFunctor_add>[f32]',
    ),
    (
        'void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)',
        'unrolled_elementwise_kernel<direct_copy_kernel_cuda>[f32]',
    ),
    (
        'void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8>)',
        'reduce_kernel<sum_functor>[bf16]',
    ),
    (
        'void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)',
        'reduce_kernel<sum_functor>[f32]',
    ),
    (
        'void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::WelfordOps<float, float, int, cuda::std::__4::pair<float, float> >, unsigned int, float, 2, 2> >(at::native::ReduceOp<float, at::native::WelfordOps<float, float, int, cuda::std::__4::pair<float, float> >, unsigned int, float, 2, 2>)',
        'reduce_kernel<WelfordOps>[f32]',
    ),
    (
        'void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*)',
        'multi_tensor_apply_kernel<FusedAdamMathFunctor>[f32]',
    ),
    (
        'void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue, long, 8>(c10::BFloat16*, c10::BFloat16 const*, long)',
        'cunn_SoftMaxForwardReg<LogSoftMaxForwardEpilogue>[bf16]',
    ),
    (
        'void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)',
        'vectorized_layer_norm_kernel[bf16]',
    ),
    (
        'void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>(int, at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}, function_traits<at::native::arange_cuda_out(c10::Scalar const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(long)#1}>::result_type*)',
        'elementwise_kernel_with_index<arange_cuda_out>[i32]',
    ),
    (
        'void at_cuda_detail::cub::detail::scan::DeviceScanKernel<at_cuda_detail::cub::detail::scan::policy_hub<long, long, long, unsigned int, at::cuda::cub::(anonymous namespace)::SumOp<long> >::Policy1000, long const*, long*, at_cuda_detail::cub::ScanTileState<long, true>, at::cuda::cub::(anonymous namespace)::SumOp<long>, at_cuda_detail::cub::detail::InputValue<long, long*>, unsigned int, long, false, long>(long const*, long*, at_cuda_detail::cub::ScanTileState<long, true>, int, at::cuda::cub::(anonymous namespace)::SumOp<long>, at_cuda_detail::cub::detail::InputValue<long, long*>, unsigned int)',
        'DeviceScanKernel<SumOp>[i64]',
    ),
    (
        'void at_cuda_detail::cub::detail::unique_by_key::DeviceUniqueByKeySweepKernel<at_cuda_detail::cub::detail::unique_by_key::policy_hub<long, int>::Policy1000, long const*, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::counting_iterator<int, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::use_default, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::use_default, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::use_default>, long*, long*, long*, at_cuda_detail::cub::ScanTileState<unsigned long long, true>, cuda::std::__4::equal_to<void>, unsigned long long, at_cuda_detail::cub::detail::unique_by_key::VSMemHelper>(long const*, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::counting_iterator<int, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::use_default, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::use_default, thrust::THRUST_300001_SM_750_800_860_900_1000_1200_NS::use_default>, long*, long*, long*, at_cuda_detail::cub::ScanTileState<unsigned long long, true>, cuda::std::__4::equal_to<void>, unsigned long long, int, at_cuda_detail::cub::detail::vsmem_t)',
        'DeviceUniqueByKeySweepKernel<counting_iterator>[i64]',
    ),
    (
        'void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*, void*, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, float, void const*, void const*, void const*, void const*, void const*, bool, void const*, void*, void const*, int, int, int, int, int, int, int, int, int)',
        'compute_dot_do_o_specialized',
    ),
    (
        'cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0',
        'cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0',
    ),
]

DOC_EXAMPLES = TABLE[:4]


def _load_corpus() -> dict[str, None]:
    """Distinct GPU event names over all shared traces, in first-seen order."""
    orjson = pytest.importorskip("orjson")
    files = sorted(TRACES.glob("*.json.gz"))
    if not files:  # pytest.fail, not assert: the xfails below expect AssertionError only
        pytest.fail(f"no *.json.gz traces in {TRACES} (the test data is part of the repository)")
    names: dict[str, None] = {}
    for path in files:
        with gzip.open(path, "rb") as fh:
            doc = orjson.loads(fh.read())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        for ev in events:
            if ev.get("cat") in GPU_CATS:
                names.setdefault(ev["name"], None)
    return names


@pytest.fixture(scope="module")
def corpus() -> dict[str, None]:
    return _load_corpus()


# --------------------------------------------------------------------------
# Exact values
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("full", "short"), DOC_EXAMPLES, ids=[s for _, s in DOC_EXAMPLES])
def test_doc_examples(full: str, short: str) -> None:
    assert short_name(full) == short


def test_doc_examples_are_the_documented_shapes() -> None:
    # The table rows really are the doc's examples (guards against editing TABLE).
    assert TABLE[0][0].startswith(
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>"
    )
    assert "launch_clamp_scalar" in TABLE[1][0]
    assert "AUnaryFunctor" in TABLE[2][0] and "MulFunctor" in TABLE[2][0]
    assert "BinaryFunctor" in TABLE[3][0] and "MulFunctor" in TABLE[3][0]


@pytest.mark.parametrize(("full", "short"), TABLE, ids=[s for _, s in TABLE])
def test_representative_table(full: str, short: str) -> None:
    assert short_name(full) == short


def test_table_names_come_from_the_traces(corpus: dict[str, None]) -> None:
    missing = [full[:100] for full, _ in TABLE if full not in corpus]
    assert missing == []


@pytest.mark.parametrize(
    "name",
    [
        "triton_poi_fused_add_relu_0",
        "triton_red_fused_add_div_mean_mul_sigmoid_std_sub_0",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
        "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
        "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8",
        "ampere_sgemm_128x64_tn",
        "Memcpy HtoD (Pinned -> Device)",
        "Memcpy DtoH (Device -> Pageable)",
        "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
        "",
    ],
)
def test_pass_through_unchanged(name: str) -> None:
    assert short_name(name) == name


@pytest.mark.parametrize(
    ("targs", "tag"),
    [
        ("float", "f32"),
        ("double", "f64"),
        ("c10::Half", "f16"),
        ("c10::BFloat16", "bf16"),
        ("int", "i32"),
        ("long", "i64"),
        ("bool", "bool"),
        ("unsigned char", "u8"),
        ("signed char", "i8"),
        ("short", "i16"),
        ("unsigned short", "u16"),
        ("unsigned int", "u32"),
        ("unsigned long long", "u64"),
        ("long long", "i64"),
        ("c10::complex<float>", "c64"),
        ("c10::complex<double>", "c128"),
        ("c10::complex<c10::Half>", "c32"),
        ("c10::Float8_e4m3fn", "f8e4m3fn"),
        ("c10::Float8_e5m2", "f8e5m2"),
        # earliest scalar type wins; separate args are not one multi-word type
        ("long, unsigned int", "i64"),
        ("4, c10::BFloat16, float", "bf16"),
        # plain char is the byte type of data pointers, not a dtype
        ("std::array<char*, 2ul>, float", "f32"),
    ],
)
def test_dtype_tags(targs: str, tag: str) -> None:
    assert short_name(f"void ns::k<{targs}>(int)") == f"k[{tag}]"


def test_rules_on_synthetic_names() -> None:
    # no template args: base only
    assert short_name("void at::native::foo_kernel(int, float*)") == "foo_kernel"
    # no parameter list at all
    assert short_name("void at::native::foo_kernel<float>") == "foo_kernel[f32]"
    # (anonymous namespace):: removed everywhere
    assert (
        short_name("void (anonymous namespace)::k<(anonymous namespace)::Op<float> >(int)")
        == "k<Op>[f32]"
    )
    # Foo::operator() names the functor, it is not a namespace qualifier
    assert (
        short_name("void ns::K<ns::Op::operator()(float) const::{lambda(float)#1}, 4>(int)")
        == "K<Op>[f32]"
    )
    # BUnaryFunctor also marks the scalar form
    assert (
        short_name(
            "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, "
            "float, float, at::native::binary_internal::DivFunctor<float> >, std::array<char*, 2ul> >"
            "(int, at::native::BUnaryFunctor<float, float, float, "
            "at::native::binary_internal::DivFunctor<float> >, std::array<char*, 2ul>)"
        )
        == "vectorized_elementwise_kernel<DivFunctor,scalar>[f32]"
    )
    # cutlass templated kernel: the flat config name is the key
    assert (
        short_name(
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
            "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)"
        )
        == "Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    )


@pytest.mark.parametrize("name", ["(", "<<<", ">>>", "void (", "::", "void <float>(int)", "a::(b)"])
def test_malformed_names_do_not_raise(name: str) -> None:
    out = short_name(name)
    assert isinstance(out, str) and out


# --------------------------------------------------------------------------
# Whole corpus
# --------------------------------------------------------------------------


def test_corpus_short_names_distinct(corpus: dict[str, None]) -> None:
    assert len(corpus) == CORPUS_DISTINCT
    # the rules separate every name ...
    by_short: dict[str, set[str]] = {}
    for n in corpus:
        by_short.setdefault(short_name(n), set()).add(n)
    assert {s: ns for s, ns in by_short.items() if len(ns) > 1} == {}
    # ... and so does the safety net
    mapping = short_names(corpus)
    assert list(mapping) == list(corpus)
    assert len(set(mapping.values())) == CORPUS_DISTINCT


def test_foreach_kernels_keep_their_std_op() -> None:
    assert short_name(PLUS_SCALAR) == "multi_tensor_apply_kernel<BinaryOpScalarFunctor,plus>[f32]"
    assert short_name(MULTIPLIES_SCALAR) == "multi_tensor_apply_kernel<BinaryOpScalarFunctor,multiplies>[f32]"


def test_corpus_short_names_distinct_by_rules_alone(corpus: dict[str, None]) -> None:
    # the rules alone separate every name, so the safety net adds no suffix
    assert len({short_name(n) for n in corpus}) == CORPUS_DISTINCT
    mapping = short_names(corpus)
    assert all(mapping[n] == short_name(n) for n in corpus)


def test_corpus_short_name_length(corpus: dict[str, None]) -> None:
    shorts = {n: short_name(n) for n in corpus}
    longest = max(shorts.values(), key=len)
    shortened = [s for n, s in shorts.items() if s != n]
    longest_shortened = max(shortened, key=len)
    print(f"\nlongest short name: {len(longest)} chars: {longest}")
    print(f"longest rule-shortened name: {len(longest_shortened)} chars: {longest_shortened}")
    over = {s for s in shorts.values() if len(s) > SHORT_CAP}
    for s in sorted(over):
        print(f"over the {SHORT_CAP}-char cap (kept whole): {len(s)} chars: {s}")
    # Only the known names exceed the cap; nothing is truncated.
    assert over == KNOWN_OVER_CAP | KNOWN_SHORTENED_OVER_CAP
    assert all(shorts[n] == n for n in KNOWN_OVER_CAP)
    assert not KNOWN_SHORTENED_OVER_CAP & set(corpus)


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="3 rule-shortened names from the ResNet-18 traces are over the 80-char cap: "
    "Kernel<cutlass_tensorop_bf16_s16816dgrad_optimized_bf16_128x128_32x5_nhwc_unity_stride_align8> (94), "
    "unrolled_elementwise_kernel_for_multi_outputs<batch_norm_update_stats_and_invert>[f64] (86), "
    "Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align8> (81)",
)
def test_corpus_rule_shortened_names_within_cap(corpus: dict[str, None]) -> None:
    shortened = [s for n, s in ((n, short_name(n)) for n in corpus) if s != n]
    assert max(len(s) for s in shortened) <= SHORT_CAP


def test_corpus_shortens_every_templated_name(corpus: dict[str, None]) -> None:
    for name in corpus:
        s = short_name(name)
        if name.startswith("void "):
            assert len(s) < len(name), name[:100]
            assert "::" not in s and "(" not in s and " " not in s, s
        else:
            assert s == name


# --------------------------------------------------------------------------
# short_names safety net
# --------------------------------------------------------------------------

A_DIV = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, "
    "float, at::native::binary_internal::DivFunctor<float> >, std::array<char*, 2ul> >(int, x)"
)
B_DIV = A_DIV.replace("AUnaryFunctor", "BUnaryFunctor")


def test_short_names_disambiguates_deterministically() -> None:
    # x / 2 and 2 / x: both are the ",scalar" form, so the rules collide.
    assert short_name(A_DIV) == short_name(B_DIV) == "vectorized_elementwise_kernel<DivFunctor,scalar>[f32]"
    forward = short_names([B_DIV, A_DIV, B_DIV])
    backward = short_names([A_DIV, B_DIV])
    assert list(forward) == [B_DIV, A_DIV]  # first-appearance order, no duplicates
    # suffixes follow the sorted full names, whatever the input order
    assert forward == backward == {
        A_DIV: "vectorized_elementwise_kernel<DivFunctor,scalar>[f32]",
        B_DIV: "vectorized_elementwise_kernel<DivFunctor,scalar>[f32]#2",
    }


def test_short_names_suffix_skips_taken_names() -> None:
    taken = "k[f32]#2"  # a flat name (passed through) that looks like a suffixed one
    names = ["void a::k<float>(int)", "void b::k<float>(int)", taken, "void c::k<float>(int)"]
    assert {short_name(n) for n in names} == {"k[f32]", taken}
    assert short_names(names) == {
        "void a::k<float>(int)": "k[f32]",
        "void b::k<float>(int)": "k[f32]#3",
        taken: taken,
        "void c::k<float>(int)": "k[f32]#4",
    }


def test_short_names_empty() -> None:
    assert short_names([]) == {}


# --------------------------------------------------------------------------
# Implementation constraints
# --------------------------------------------------------------------------


def test_short_name_is_cached() -> None:
    short_name.cache_clear()
    name = TABLE[0][0]
    for _ in range(1000):
        short_name(name)
    info = short_name.cache_info()
    assert info.misses == 1 and info.hits == 999


def test_scanning_is_linear_on_long_and_deep_names() -> None:
    raw = short_name.__wrapped__
    longest = max((full for full, _ in TABLE), key=len)
    assert len(longest) == 1118
    start = time.perf_counter()
    for _ in range(200):
        raw(longest)
    assert time.perf_counter() - start < 2.0  # ~10 ms per call would be a regression
    deep = "void ns::k<" + "ns::W<" * 5000 + "float" + ">" * 5000 + ">(" + "(" * 5000 + ")" * 5000 + ")"
    start = time.perf_counter()
    assert raw(deep) == "k<W>[f32]"
    unbalanced = "void ns::k<" * 3000 + "{lambda(" * 3000
    assert isinstance(raw(unbalanced), str)
    assert time.perf_counter() - start < 2.0


def test_data_layer_imports_neither_textual_nor_torch() -> None:
    import kerneltui.trace.names as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"textual", "torch", "re"}
