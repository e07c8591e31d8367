#pragma once
// Exceptions thrown by wgnn. Every failure a user can cause (bad input, a
// limit of the device, an unsupported op) is an Error with a message that
// names what was wrong and what is accepted.
#include <stdexcept>
#include <string>

namespace wgnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something wgnn does not implement (an op, a dtype, an attribute value):
// the input may be valid, but this runtime cannot run it.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// The host ran out of memory (std::bad_alloc, a failed mmap) while doing
// something: the message says what ("out of host memory while ...").
class HostOutOfMemory : public Error {
 public:
  explicit HostOutOfMemory(const std::string& what) : Error("out of host memory while " + what) {}
};

namespace gpu {

// An error reported by the WebGPU implementation (validation, out of memory,
// internal), carrying its message.
class GpuError : public Error {
 public:
  using Error::Error;
};

// The device was lost (driver reset, out of memory, destroyed). The Context
// that raised it is unusable; a new Context may be created.
class DeviceLost : public GpuError {
 public:
  using GpuError::GpuError;
};

}  // namespace gpu
}  // namespace wgnn
