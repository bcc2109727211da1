// A stand-in for pto-isa's <pto/pto-inst.hpp>, just big enough to compile the GlobalTensor headers ptoc
// writes (tests/codegen/test_global_tensor.py). It mirrors the real declarations
// (include/pto/common/pto_tile.hpp, include/pto/common/type.hpp):
//   constexpr int DYNAMIC = -1;
//   template <int N1, int N2, int N3, int N4, int N5> struct Shape;      (real: each defaults to DYNAMIC)
//   template <int SN1, int SN2, int SN3, int SN4, int SN5> struct Stride;
//   enum class Layout { ND, DN, NZ, ... };
//   template <typename Element_, typename Shape_, typename Stride_, Layout Layout_> struct GlobalTensor;
// and is deliberately stricter than the real headers:
// - Shape and Stride take exactly five ints, no defaults, so a header that writes fewer fails;
// - GlobalTensor is defined only for a pto::Shape and a pto::Stride in that order;
// - the NZ checks pto-isa makes on a load (shape[3] == 16, shape[4] == 32 / sizeof(T)) are static_asserts of
//   the class itself, so forming the type (any member access) checks them.
// Like the real type header, it uses uint8_t without including <cstdint>: the generated header must include
// <cstdint> first.
#pragma once

// Element types pto-isa provides at global scope (the real ones are compiler types or typedefs of _Float16).
struct half { unsigned char storage[2]; };
struct bfloat16_t { unsigned char storage[2]; };
struct float8_e4m3_t { unsigned char storage; };
struct float8_e5m2_t { unsigned char storage; };
struct float8_e8m0_t { unsigned char storage; };
struct hifloat8_t { unsigned char storage; };
struct float4_e2m1x2_t { unsigned char storage; };  // two 4-bit values in one byte
struct float4_e1m2x2_t { unsigned char storage; };
static_assert(sizeof(half) == 2 && sizeof(bfloat16_t) == 2, "16-bit element types");
static_assert(sizeof(float8_e4m3_t) == 1 && sizeof(float8_e5m2_t) == 1 && sizeof(float8_e8m0_t) == 1 &&
              sizeof(hifloat8_t) == 1 && sizeof(float4_e2m1x2_t) == 1 && sizeof(float4_e1m2x2_t) == 1,
              "8-bit element types");

namespace pto {

enum class MaskPattern : uint8_t { P0101 = 1, P1010 = 2, P0001 = 3, P0010 = 4, P0100 = 5, P1000 = 6, P1111 = 7 };

constexpr int DYNAMIC = -1;

enum class Layout { ND, DN, NZ };

template <int N1, int N2, int N3, int N4, int N5>
struct Shape {
    static constexpr int staticShape[5] = {N1, N2, N3, N4, N5};
};

template <int SN1, int SN2, int SN3, int SN4, int SN5>
struct Stride {
    static constexpr int staticStride[5] = {SN1, SN2, SN3, SN4, SN5};
};

template <typename Element_, typename Shape_, typename Stride_, Layout Layout_>
struct GlobalTensor;  // only the specialisation below is defined

template <typename Element_, int N1, int N2, int N3, int N4, int N5, int SN1, int SN2, int SN3, int SN4, int SN5,
          Layout Layout_>
struct GlobalTensor<Element_, Shape<N1, N2, N3, N4, N5>, Stride<SN1, SN2, SN3, SN4, SN5>, Layout_> {
    using Shape = pto::Shape<N1, N2, N3, N4, N5>;
    using Stride = pto::Stride<SN1, SN2, SN3, SN4, SN5>;
    using DType = Element_;
    static constexpr Layout layout = Layout_;
    static constexpr int staticShape[5] = {N1, N2, N3, N4, N5};
    static constexpr int staticStride[5] = {SN1, SN2, SN3, SN4, SN5};

    static_assert(N1 >= -1 && N2 >= -1 && N3 >= -1 && N4 >= -1 && N5 >= -1, "shape: a size or DYNAMIC");
    static_assert(SN1 >= -1 && SN2 >= -1 && SN3 >= -1 && SN4 >= -1 && SN5 >= -1, "stride: a stride or DYNAMIC");
    static_assert(Layout_ != Layout::NZ || N4 == DYNAMIC || N4 == 16, "NZ: shape[3] must be 16");
    static_assert(Layout_ != Layout::NZ || N5 == DYNAMIC || N5 * sizeof(Element_) == 32,
                  "NZ: shape[4] must be 32 / sizeof(T)");
};

}  // namespace pto
