// The one string hash Ember uses for content keys and checksums: 64-bit FNV-1a, optionally
// followed by the splitmix64 finalizer (fnv1a64_mixed) so that nearby inputs differ in every bit.
#pragma once

#include <cstdint>
#include <string_view>

namespace ember {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// FNV-1a of `s`, starting from `h` (the offset basis by default; another start seeds a lane).
inline uint64_t fnv1a64(std::string_view s, uint64_t h = kFnvOffset) {
  for (unsigned char c : s) h = (h ^ c) * kFnvPrime;
  return h;
}

// fnv1a64 then splitmix64's final avalanche.
inline uint64_t fnv1a64_mixed(std::string_view s, uint64_t h = kFnvOffset) {
  h = fnv1a64(s, h);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace ember
