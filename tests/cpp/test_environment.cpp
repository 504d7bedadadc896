// After the last test of a process: the Vulkan context is destroyed (vk::shutdown), which must
// succeed, i.e. no tensor, pipeline or compiled program made on the device outlives the tests
// (every one is Ember's leak), and with the validation layer on, destroying the device must not
// report objects left on it. With the context gone, LeakSanitizer (tools/test --sanitize) sees
// every driver object released: lavapipe and the validation layer keep references to live
// objects in memory LeakSanitizer does not scan, so a device kept to the end reads as leaked.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "backends/backend.h"

#ifdef EMBER_WITH_VULKAN
#include "backends/vulkan/vulkan.h"
#endif

namespace {

class ReleaseDevices : public ::testing::Environment {
 public:
  // The Vulkan loader unloads the driver and the layers when the instance goes (vk::shutdown), so
  // a LeakSanitizer report at exit could not name them (<unknown module>): pinned in memory with
  // RTLD_NODELETE, they stay mapped and named, and lsan.supp can tell their leaks from Ember's.
  void SetUp() override {
    for (const char* lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so"})
      dlopen(lib, RTLD_NOW | RTLD_NODELETE);
  }
  void TearDown() override {
#ifdef EMBER_WITH_VULKAN
    const int errors = ember::vk::validation_errors();
    EXPECT_TRUE(ember::vk::shutdown()) << "a Vulkan tensor, pipeline or compiled program outlives the tests";
    EXPECT_EQ(ember::vk::validation_errors(), errors) << "Vulkan validation errors when destroying the device";
#endif
  }
};

[[maybe_unused]] ::testing::Environment* const kReleaseDevices =
    ::testing::AddGlobalTestEnvironment(new ReleaseDevices);

}  // namespace

#ifdef EMBER_WITH_VULKAN
// vk::shutdown refuses (and keeps the device usable) while something made on it is alive.
TEST(VulkanShutdown, KeepsTheDeviceWhileATensorLives) {
  const std::string why = ember::backend_unavailable("vulkan");
  if (!why.empty()) GTEST_SKIP() << "vulkan unavailable: " << why;
  ember::HostTensor t = ember::vk::device_tensor(ember::DType::f32, {4}, true);
  EXPECT_FALSE(ember::vk::shutdown());
  EXPECT_EQ(ember::vk::unavailable_reason(), "");
  EXPECT_NE(ember::vk::find_buffer(t.data), nullptr);
}
#endif
