#pragma once
// Internal: transparent huge pages for malloc's heap, where the library's arrays live
// (startup.cpp keeps every block there).

namespace xgrad::detail {

// Marks what malloc's heap grew by since the last call as wanting transparent huge pages
// (madvise MADV_HUGEPAGE), where the kernel gives them on request (THP "madvise", as on
// Debian, or "always"). new_array calls it after each allocation, so a growth is marked
// before the array is written and faults in 2 MB pages. Cheap when the heap did not grow
// (one comparison); does nothing under XGRAD_HUGE_PAGES=0, or when malloc is not on the
// heap (a sanitizer's allocator).
void advise_heap_growth();

// Starts the marking from the heap's end now (the library's load), unless XGRAD_HUGE_PAGES=0.
void start_heap_advice();

}  // namespace xgrad::detail
