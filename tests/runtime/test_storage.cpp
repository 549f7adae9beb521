// Note [Freed storage] semantics: views survive free and re-allocation, data
// access while freed throws, re-sizing only through the explicit call, and
// memory moves between storages or is borrowed without a copy.
#include <boost/test/unit_test.hpp>

#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/tensor.h"

using namespace zrt;

BOOST_AUTO_TEST_SUITE(storage)

BOOST_AUTO_TEST_CASE(views_survive_free_and_realloc) {
  Tensor flat = Tensor::from_doubles({1, 2, 3, 4, 5, 6, 7}, DType::f32);
  flat.set_name("flat");
  Tensor a = flat.slice(0, 3).view({3, 1}).set_name("a");
  Tensor b = flat.slice(3, 4).view({2, 2}).set_name("b");
  BOOST_TEST(b.item(3) == 7.0);

  free_storage(flat);
  BOOST_TEST(flat.is_freed());
  BOOST_TEST(a.is_freed());
  BOOST_TEST(flat.storage().nbytes() == 0u);
  // Views keep their metadata.
  BOOST_TEST(b.shape() == (Shape{2, 2}));
  BOOST_TEST(b.offset() == 3);
  BOOST_CHECK_THROW(a.data_ptr(), InvalidState);
  BOOST_CHECK_THROW(b.item(0), InvalidState);
  BOOST_CHECK_THROW(b.fill_(1.0), InvalidState);
  try {
    (void)b.data_ptr();
  } catch (const InvalidState& e) {
    BOOST_TEST(std::string(e.what()).find("b[2, 2]") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("freed") != std::string::npos);
  }

  alloc_storage(flat);
  BOOST_TEST(flat.storage().nbytes() == 7 * sizeof(float));
  flat.copy_(Tensor::from_doubles({-1, -2, -3, -4, -5, -6, -7}, DType::f64));
  BOOST_TEST(a.item(2) == -3.0);
  BOOST_TEST(b.item(0) == -4.0);
}

BOOST_AUTO_TEST_CASE(realloc_only_when_freed) {
  Tensor t = Tensor::zeros({5}, DType::bf16);
  BOOST_CHECK_THROW(t.storage().allocate(100), InvalidState);
  free_storage(t);
  free_storage(t);          // idempotent
  t.storage().allocate(4);  // explicit, smaller than the view needs
  BOOST_CHECK_THROW(t.data_ptr(), InvalidState);
  t.storage().free();
  t.storage().allocate(10);
  BOOST_CHECK_NO_THROW(t.fill_(2.5));
  BOOST_TEST(t.item(4) == 2.5);
}

BOOST_AUTO_TEST_CASE(adopting_memory_moves_it_without_a_copy) {
  Tensor from = Tensor::from_doubles({1.5, -2, 3.25, 7}, DType::f32);
  Tensor into = Tensor::empty({4}, DType::f32);
  Tensor into_view = into.slice(1, 2);
  void* bytes = from.data_ptr();
  BOOST_CHECK_THROW(into.storage().adopt_memory(from.storage()), InvalidState);  // into is live
  free_storage(into);
  into.storage().adopt_memory(from.storage());
  BOOST_TEST(from.is_freed());
  BOOST_TEST(into.data_ptr() == bytes);
  BOOST_TEST(into_view.to_doubles() == (std::vector<double>{-2, 3.25}));
  Tensor empty = Tensor::empty({4}, DType::f32);
  free_storage(empty);
  BOOST_CHECK_THROW(empty.storage().adopt_memory(from.storage()), InvalidState);  // from is freed
}

BOOST_AUTO_TEST_CASE(borrowed_memory_is_shared_and_never_freed_by_the_borrower) {
  auto alloc = make_caching_allocator(Device::cpu());
  auto owner = std::make_shared<Storage>(5 * sizeof(float), alloc);
  Tensor master = Tensor::from_storage(owner, {5}, DType::f32).set_name("master");
  master.copy_(Tensor::from_doubles({0.5, -1, 2, 3.75, -9}, DType::f64));
  Tensor borrower = Tensor::from_storage(std::make_shared<Storage>(0, alloc), {5}, DType::f32);
  const std::size_t allocated = alloc->stats().allocated;
  BOOST_CHECK_THROW(master.storage().borrow_memory(owner), InvalidArgument);  // itself
  borrower.storage().borrow_memory(owner);
  BOOST_TEST(borrower.storage().is_borrowed());
  BOOST_TEST(borrower.data_ptr() == master.data_ptr());
  BOOST_TEST(alloc->stats().allocated == allocated);  // no bytes of its own
  borrower.slice(2, 1).fill_(-4);
  BOOST_TEST(master.item(2) == -4.0);  // one buffer, two roles
  BOOST_CHECK_THROW(borrower.storage().borrow_memory(owner), InvalidState);  // already holds memory
  Tensor other = Tensor::empty({5}, DType::f32);
  free_storage(other);
  BOOST_CHECK_THROW(other.storage().adopt_memory(borrower.storage()),
                    InvalidState);  // not its to give
  free_storage(borrower);           // lets go only
  BOOST_TEST(borrower.is_freed());
  BOOST_TEST(!borrower.storage().is_borrowed());
  BOOST_TEST(alloc->stats().allocated == allocated);
  BOOST_TEST(master.to_doubles() == (std::vector<double>{0.5, -1, -4, 3.75, -9}));
  free_storage(master);
  BOOST_CHECK_THROW(borrower.storage().borrow_memory(owner), InvalidState);  // owner freed
  BOOST_TEST(alloc->stats().allocated == 0u);
}

BOOST_AUTO_TEST_CASE(zero_sized_storage_is_usable_as_empty) {
  Tensor t = Tensor::empty({0, 3}, DType::f32);
  BOOST_TEST(t.numel() == 0);
  BOOST_TEST(t.is_freed());
  BOOST_CHECK_NO_THROW(t.fill_(1.0));
  BOOST_TEST(t.to_doubles().empty());
}

BOOST_AUTO_TEST_SUITE_END()
