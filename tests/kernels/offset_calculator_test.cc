// The CUDA elementwise engine's index arithmetic (kernels/cuda/
// offset_calculator.h), on the host: magic-number division, dim ordering
// and merging, the 32-bit test, and the offsets of every element for
// random shapes, strides, broadcasts and permutations of up to four
// operands, with both index widths, against naive index arithmetic. Plain
// C++: runs in every build, with or without CUDA.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../../kernels/cuda/offset_calculator.h"
#include "gtest/gtest.h"

namespace tensord::cuda {
namespace {

TEST(IntDividerTest, MagicDivisionIsExact) {
  std::mt19937_64 rng(7);
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 7, 10, 25, 255, 256, 257, 1000, 65535, 65536, 65537, 1u << 20,
                                    (1u << 30) - 1, 1u << 30, (1u << 30) + 1, 0x7FFFFFFEu, 0x7FFFFFFFu};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % 0x7FFFFFFFu));
  for (int i = 0; i < 100; ++i) divisors.push_back(1 + static_cast<uint32_t>(rng() % 1000));
  for (uint32_t d : divisors) {
    const IntDivider<uint32_t> div(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 0x7FFFFFFEu, 0x7FFFFFFFu};
    for (int i = 0; i < 2000; ++i) ns.push_back(static_cast<uint32_t>(rng() % 0x80000000u));
    for (uint32_t n : ns) {
      if (n > 0x7FFFFFFFu) continue;
      const DivMod<uint32_t> qr = div.divmod(n);
      ASSERT_EQ(qr.div, n / d) << n << " / " << d;
      ASSERT_EQ(qr.mod, n % d) << n << " % " << d;
    }
  }
}

// A random operand layout over `shape`: contiguous, permuted, spread,
// broadcast (stride 0 on some dims), or with negative strides.
std::vector<int64_t> RandomStrides(const std::vector<int64_t>& shape, int64_t itemsize, std::mt19937& rng) {
  const int nd = static_cast<int>(shape.size());
  std::vector<int> order(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) order[static_cast<size_t>(i)] = nd - 1 - i;  // innermost first
  const int kind = static_cast<int>(rng() % 5);
  if (kind == 1) std::shuffle(order.begin(), order.end(), rng);  // permuted dense
  std::vector<int64_t> strides(static_cast<size_t>(nd), 0);
  int64_t s = kind == 2 ? 2 : 1;  // spread: every other element
  for (int d : order) {
    strides[static_cast<size_t>(d)] = s * itemsize;
    s *= std::max<int64_t>(shape[static_cast<size_t>(d)], 1);
  }
  if (kind == 3) {  // broadcast some dims
    for (int d = 0; d < nd; ++d) {
      if (rng() % 2) strides[static_cast<size_t>(d)] = 0;
    }
  }
  if (kind == 4 && nd > 0) {  // a reversed dim
    const size_t d = rng() % static_cast<size_t>(nd);
    strides[d] = -strides[d];
  }
  return strides;
}

// The byte offsets of every element in row-major order, per operand.
std::vector<std::vector<int64_t>> NaiveOffsets(const std::vector<int64_t>& shape,
                                               const std::vector<std::vector<int64_t>>& strides) {
  std::vector<std::vector<int64_t>> out;
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < numel; ++i) {
    std::vector<int64_t> offs;
    for (const auto& st : strides) {
      int64_t o = 0;
      for (size_t d = 0; d < shape.size(); ++d) o += idx[d] * st[d];
      offs.push_back(o);
    }
    out.push_back(offs);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return out;
}

template <int N, typename index_t>
std::vector<std::vector<int64_t>> CalculatorOffsets(const ElementwiseGeometry& g) {
  const OffsetCalculator<N, index_t> calc(g);
  std::vector<std::vector<int64_t>> out;
  const int64_t numel = g.numel();
  for (int64_t i = 0; i < numel; ++i) {
    const auto off = calc.get(static_cast<index_t>(i));
    std::vector<int64_t> v;
    for (int k = 0; k < N; ++k) v.push_back(off[k]);
    out.push_back(v);
  }
  return out;
}

template <int N>
void CheckRandomLayouts(std::mt19937& rng, int cases) {
  for (int c = 0; c < cases; ++c) {
    const int nd = static_cast<int>(rng() % 7);
    std::vector<int64_t> shape;
    for (int d = 0; d < nd; ++d) {
      const uint32_t r = rng() % 10;
      shape.push_back(r == 0 ? 1 : r == 1 && c % 17 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 5));
    }
    std::vector<std::vector<int64_t>> strides;
    std::vector<const int64_t*> ptrs;
    for (int k = 0; k < N; ++k) strides.push_back(RandomStrides(shape, int64_t{1} << (rng() % 4), rng));
    for (const auto& s : strides) ptrs.push_back(s.data());
    ElementwiseGeometry g;
    ASSERT_TRUE(BuildGeometry(nd, shape.data(), N, ptrs.data(), &g));
    std::vector<std::vector<int64_t>> want = NaiveOffsets(shape, strides);
    ASSERT_EQ(g.numel(), static_cast<int64_t>(want.size()));
    // The visiting order is unspecified: every element once, each operand's
    // offsets together.
    std::sort(want.begin(), want.end());
    ASSERT_TRUE(Fits32BitIndexing(g));
    std::vector<std::vector<int64_t>> got32 = CalculatorOffsets<N, uint32_t>(g);
    std::vector<std::vector<int64_t>> got64 = CalculatorOffsets<N, uint64_t>(g);
    std::sort(got32.begin(), got32.end());
    std::sort(got64.begin(), got64.end());
    ASSERT_EQ(got32, want) << "case " << c << ", " << nd << " dims";
    ASSERT_EQ(got64, want) << "case " << c << ", " << nd << " dims";
  }
}

TEST(OffsetCalculatorTest, RandomLayoutsMatchNaiveIndexing) {
  std::mt19937 rng(11);
  CheckRandomLayouts<1>(rng, 300);
  CheckRandomLayouts<2>(rng, 300);
  CheckRandomLayouts<3>(rng, 300);
  CheckRandomLayouts<4>(rng, 300);
}

// BuildLogicalGeometry keeps row-major order: linear index i is element i.
TEST(OffsetCalculatorTest, LogicalGeometryWalksRowMajor) {
  std::mt19937 rng(13);
  for (int c = 0; c < 400; ++c) {
    const int nd = static_cast<int>(rng() % 6);
    std::vector<int64_t> shape;
    for (int d = 0; d < nd; ++d) shape.push_back(rng() % 4 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % 4));
    const int n = 1 + static_cast<int>(rng() % 2);
    std::vector<std::vector<int64_t>> strides;
    std::vector<const int64_t*> ptrs;
    for (int k = 0; k < n; ++k) strides.push_back(RandomStrides(shape, 4, rng));
    for (const auto& s : strides) ptrs.push_back(s.data());
    ElementwiseGeometry g;
    ASSERT_TRUE(BuildLogicalGeometry(nd, shape.data(), n, ptrs.data(), &g));
    const std::vector<std::vector<int64_t>> want = NaiveOffsets(shape, strides);  // row-major
    std::vector<std::vector<int64_t>> got =
        n == 1 ? CalculatorOffsets<1, uint64_t>(g) : CalculatorOffsets<2, uint64_t>(g);
    ASSERT_EQ(got, want) << "case " << c;
  }
  // Contiguous dims merge; permuted ones do not.
  const int64_t shape[] = {3, 4};
  const int64_t contiguous[] = {16, 4}, transposed[] = {4, 12};
  const int64_t* c1[] = {contiguous};
  const int64_t* t1[] = {transposed};
  ElementwiseGeometry g;
  ASSERT_TRUE(BuildLogicalGeometry(2, shape, 1, c1, &g));
  EXPECT_EQ(g.ndim, 1);
  ASSERT_TRUE(BuildLogicalGeometry(2, shape, 1, t1, &g));
  EXPECT_EQ(g.ndim, 2);
  EXPECT_EQ(g.sizes[0], 4);  // the last dim innermost, whatever its stride
}

ElementwiseGeometry Geometry(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides) {
  std::vector<const int64_t*> ptrs;
  for (const auto& s : strides) ptrs.push_back(s.data());
  ElementwiseGeometry g;
  EXPECT_TRUE(BuildGeometry(static_cast<int>(shape.size()), shape.data(), static_cast<int>(strides.size()),
                            ptrs.data(), &g));
  return g;
}

TEST(OffsetCalculatorTest, MergesDenseLayoutsIntoOneDim) {
  // Contiguous: one dim of 60, innermost strides the item sizes.
  ElementwiseGeometry g = Geometry({3, 5, 4}, {{80, 16, 4}, {40, 8, 2}});
  ASSERT_EQ(g.ndim, 1);
  EXPECT_EQ(g.sizes[0], 60);
  EXPECT_EQ(g.strides[0][0], 4);
  EXPECT_EQ(g.strides[0][1], 2);
  // Both permuted the same way (dim 0 innermost): still one dim.
  g = Geometry({3, 5, 4}, {{4, 12, 60}, {4, 12, 60}});
  ASSERT_EQ(g.ndim, 1);
  EXPECT_EQ(g.strides[0][0], 4);
  // Size-1 dims are dropped; a 0-dim or all-ones shape is one element.
  g = Geometry({1, 3, 1, 4}, {{48, 16, 16, 4}});
  EXPECT_EQ(g.ndim, 1);
  g = Geometry({}, {{}});
  EXPECT_EQ(g.ndim, 0);
  EXPECT_EQ(g.numel(), 1);
  g = Geometry({1, 1}, {{4, 4}});
  EXPECT_EQ(g.ndim, 0);
  // A broadcast operand keeps the dims apart.
  g = Geometry({3, 4}, {{16, 4}, {0, 4}});
  EXPECT_EQ(g.ndim, 2);
  // Empty: one dim of size 0.
  g = Geometry({3, 0, 2}, {{0, 8, 4}});
  EXPECT_EQ(g.ndim, 1);
  EXPECT_EQ(g.numel(), 0);
  // The output (operand 0) decides the order: its column-major layout puts dim 0 innermost.
  g = Geometry({4, 6}, {{4, 16}, {24, 4}});
  ASSERT_EQ(g.ndim, 2);
  EXPECT_EQ(g.sizes[0], 4);
  EXPECT_EQ(g.strides[0][0], 4);
}

TEST(OffsetCalculatorTest, RefusesMoreThanMaxDimsAfterMerging) {
  // 26 dims of size 2 with every other element skipped: nothing merges.
  std::vector<int64_t> shape(26, 2), strides(26);
  int64_t s = 2;
  for (int d = 25; d >= 0; --d) {
    strides[static_cast<size_t>(d)] = s;
    s *= 4;
  }
  const int64_t* ptrs[] = {strides.data()};
  ElementwiseGeometry g;
  EXPECT_FALSE(BuildGeometry(26, shape.data(), 1, ptrs, &g));
  // 30 dims that merge into one are fine.
  std::vector<int64_t> shape30(30, 2), contiguous(30);
  s = 1;
  for (int d = 29; d >= 0; --d) {
    contiguous[static_cast<size_t>(d)] = s;
    s *= 2;
  }
  const int64_t* ptrs30[] = {contiguous.data()};
  ASSERT_TRUE(BuildGeometry(30, shape30.data(), 1, ptrs30, &g));
  EXPECT_EQ(g.ndim, 1);
  EXPECT_FALSE(BuildGeometry(1, shape.data(), 0, ptrs, &g));  // no operands
  EXPECT_FALSE(BuildGeometry(1, shape.data(), kMaxOperands + 1, ptrs, &g));
}

TEST(OffsetCalculatorTest, ThirtyTwoBitIndexingOnlyWhenEveryExtentFits) {
  // numel 2^31 - 1 bytes: fits; 2^31: does not.
  EXPECT_TRUE(Fits32BitIndexing(Geometry({INT32_MAX}, {{1}})));
  EXPECT_FALSE(Fits32BitIndexing(Geometry({int64_t{1} << 31}, {{1}})));
  // Few elements far apart: numel fits, the byte offsets do not.
  EXPECT_FALSE(Fits32BitIndexing(Geometry({3}, {{int64_t{1} << 30}})));
  EXPECT_TRUE(Fits32BitIndexing(Geometry({2}, {{(int64_t{1} << 31) - 1}})));
  // Only one operand too wide is enough; negative strides count by size.
  EXPECT_FALSE(Fits32BitIndexing(Geometry({1 << 20, 3}, {{12, 4}, {8, int64_t{1} << 30}})));
  EXPECT_FALSE(Fits32BitIndexing(Geometry({5}, {{-(int64_t{1} << 30)}})));
  // Broadcast (stride 0) dims add nothing.
  EXPECT_TRUE(Fits32BitIndexing(Geometry({1 << 20, 1 << 10}, {{1 << 10, 1}, {0, 1}})));
  // Empty tensors address nothing.
  EXPECT_TRUE(Fits32BitIndexing(Geometry({0, int64_t{1} << 40}, {{1, 1}})));
}

TEST(OffsetCalculatorTest, SixtyFourBitOffsetsPastTwoGiB) {
  // A [3, 2^20] operand of 4-byte elements whose rows lie 2^31 bytes apart.
  const ElementwiseGeometry g = Geometry({3, 1 << 20}, {{int64_t{1} << 31, 4}});
  ASSERT_FALSE(Fits32BitIndexing(g));
  const OffsetCalculator<1, uint64_t> calc(g);
  EXPECT_EQ(calc.get(0)[0], 0);
  EXPECT_EQ(calc.get((1 << 20) + 5)[0], (int64_t{1} << 31) + 20);
  EXPECT_EQ(calc.get(2 * (1 << 20) + 7)[0], (int64_t{1} << 32) + 28);
}

}  // namespace
}  // namespace tensord::cuda
