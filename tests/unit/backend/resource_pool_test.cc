// ResourcePool: one node's GPUs and CPU slots, handed out without overlap.
#include "backend/resource_pool.h"

#include "gtest/gtest.h"

namespace hpo::backend {
namespace {

Resources Ask(int gpus, int cpus, int tasks = 1) {
  Resources r;
  r.gpus = gpus;
  r.cpus = cpus;
  r.tasks_per_node = tasks;
  return r;
}

TEST(ResourcePool, HandsOutDistinctGpusAndCountsCpus) {
  ResourcePool pool(4, 8);
  auto a = pool.Acquire(Ask(2, 2));
  auto b = pool.Acquire(Ask(1, 1, 3));  // 3 tasks of 1 CPU
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->CudaVisibleDevices(), "0,1");
  EXPECT_EQ(b->CudaVisibleDevices(), "2");
  EXPECT_EQ(pool.free_gpus(), 1);
  EXPECT_EQ(pool.free_cpus(), 3);
  EXPECT_FALSE(pool.Fits(Ask(2, 1)));
  EXPECT_FALSE(pool.Acquire(Ask(0, 4)));
  pool.Release(*a);
  EXPECT_TRUE(pool.Fits(Ask(3, 5)));
  EXPECT_TRUE(pool.IsFree(0));
  EXPECT_FALSE(pool.IsFree(2));
  EXPECT_FALSE(pool.IsFree(4));
}

TEST(ResourcePool, AnAdoptedTrialKeepsExactlyItsGpus) {
  ResourcePool pool(4, 8);
  Grant held = pool.AcquireExact({1, 3, 9}, 2);  // 9 is no GPU of this node
  EXPECT_EQ(held.CudaVisibleDevices(), "1,3");
  auto next = pool.Acquire(Ask(2, 1));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->CudaVisibleDevices(), "0,2");
}

TEST(ResourcePool, SaysWhyATrialCanNeverFit) {
  ResourcePool pool(2, 4);
  EXPECT_TRUE(pool.CheckFits(Ask(2, 4)).ok());
  EXPECT_NE(pool.CheckFits(Ask(3, 1)).message().find("2 GPU(s)"), std::string::npos);
  EXPECT_NE(pool.CheckFits(Ask(0, 2, 3)).message().find("6 CPU(s)"), std::string::npos);
  Resources two_nodes = Ask(1, 1);
  two_nodes.nodes = 2;
  EXPECT_TRUE(absl::IsInvalidArgument(pool.CheckFits(two_nodes)));
}

}  // namespace
}  // namespace hpo::backend
