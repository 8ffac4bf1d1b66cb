// Hand-offs that ThreadSanitizer cannot see, stated to it: Debian's oneTBB, gRPC and Abseil are not instrumented,
// so when work on one thread is handed to another through them (a oneTBB task, a gRPC reaction), TSan sees no
// ordering and reports the receiver's first touch of what the sender wrote. SLUICE_TSAN_RELEASE(p) on the sending
// side, before the hand-off, and SLUICE_TSAN_ACQUIRE(p) on the receiving side, first thing, order the two through
// the address `p` (as a release-store / acquire-load pair would). Each use says, in a comment, which guarantee of
// the library it stands for. No-ops (nothing compiled) without TSan.
// Thread-safety: callable from any thread.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN_HANDOFF 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN_HANDOFF 1
#endif
#endif

#ifdef SLUICE_TSAN_HANDOFF
#include <sanitizer/tsan_interface.h>
#define SLUICE_TSAN_RELEASE(p) __tsan_release(const_cast<void*>(static_cast<const volatile void*>(p)))
#define SLUICE_TSAN_ACQUIRE(p) __tsan_acquire(const_cast<void*>(static_cast<const volatile void*>(p)))
#else
#define SLUICE_TSAN_RELEASE(p) static_cast<void>(p)
#define SLUICE_TSAN_ACQUIRE(p) static_cast<void>(p)
#endif
