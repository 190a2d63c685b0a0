#include "xgrad/autograd/kernels/mask.hpp"

namespace xgrad::kernels {

template <class T>
void select_where(const std::uint8_t* keep, const T* a, const std::size_t* a_at, const T* b, const std::size_t* b_at,
                  std::size_t n, T* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = keep[i] ? a[a_at[i]] : b[b_at[i]];
}

template <class T>
void scatter_add_where(const T* g, const std::uint8_t* keep, bool taken, const std::size_t* at, std::size_t n, T* dx) {
  for (std::size_t i = 0; i < n; ++i)
    if (static_cast<bool>(keep[i]) == taken) dx[at[i]] += g[i];
}

template <class T>
void fill_where(const std::uint8_t* mask, std::size_t n, T value, T* x) {
  for (std::size_t i = 0; i < n; ++i)
    if (mask[i]) x[i] = value;
}

template <class T>
void keep_triangle(const T* x, T* out, std::size_t n, std::size_t rows, std::size_t cols, std::int64_t diagonal,
                   bool upper) {
  for (std::size_t at = 0; at < n; ++at) {
    const auto j = static_cast<std::int64_t>(at % cols), i = static_cast<std::int64_t>(at / cols % rows);
    const std::int64_t above = j - i;
    out[at] = (upper ? above >= diagonal : above <= diagonal) ? x[at] : T(0);
  }
}

template void select_where<float>(const std::uint8_t*, const float*, const std::size_t*, const float*,
                                  const std::size_t*, std::size_t, float*);
template void select_where<double>(const std::uint8_t*, const double*, const std::size_t*, const double*,
                                   const std::size_t*, std::size_t, double*);
template void scatter_add_where<float>(const float*, const std::uint8_t*, bool, const std::size_t*, std::size_t,
                                       float*);
template void scatter_add_where<double>(const double*, const std::uint8_t*, bool, const std::size_t*, std::size_t,
                                        double*);
template void fill_where<float>(const std::uint8_t*, std::size_t, float, float*);
template void fill_where<double>(const std::uint8_t*, std::size_t, double, double*);
template void keep_triangle<float>(const float*, float*, std::size_t, std::size_t, std::size_t, std::int64_t, bool);
template void keep_triangle<double>(const double*, double*, std::size_t, std::size_t, std::size_t, std::int64_t, bool);

}  // namespace xgrad::kernels
