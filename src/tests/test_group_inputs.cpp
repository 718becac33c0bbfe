// The GPU backend's input staging plan (src/gpu/group_inputs.h): which rows of an expert group
// cross to the device. Pure host logic; the GPU tests run the same groups against the CPU.
#include <cmath>
#include <cstring>

#include "catch_compat.h"
#include "gpu/group_inputs.h"
#include "testing/test_data.h"

using namespace coli;

namespace {

// x as the engine hands it over: the blocks named in `blocks` (one block of rows per expert).
std::vector<float> stack(const std::vector<std::vector<float>> &blocks) {
    std::vector<float> x;
    for (const auto &b : blocks) x.insert(x.end(), b.begin(), b.end());
    return x;
}

} // namespace

TEST_CASE("group inputs: a block repeating the first or the previous expert's is staged once", "[expert]") {
    const int64_t D = 5;
    const std::vector<float> a = testing::random_normal(2 * D, 1), b = testing::random_normal(2 * D, 2),
                             c = testing::random_normal(1 * D, 3);
    // experts: a, a (repeats first), b, b (repeats previous), a (repeats first), c, (empty), c (repeats
    // the previous expert with rows)
    const std::vector<int64_t> rows = {2, 2, 2, 2, 2, 1, 0, 1};
    const std::vector<float> x = stack({a, a, b, b, a, c, {}, c});
    const gpu::GroupInputs in = gpu::plan_group_inputs(rows.data(), rows.size(), x.data(), D);
    CHECK(in.staged_rows == 5); // a, b, c
    CHECK(in.staged == std::vector<char>{1, 0, 1, 0, 0, 1, 1, 0});
    CHECK(in.staged_row == std::vector<int64_t>{0, 0, 2, 2, 0, 4, 5, 4});
    CHECK(in.caller_row == std::vector<int64_t>{0, 2, 4, 6, 8, 10, 11, 11});
    std::vector<float> staged(static_cast<size_t>(in.staged_rows * D), std::nanf(""));
    gpu::gather_group_inputs(in, rows.data(), x.data(), D, staged.data());
    CHECK(staged == stack({a, b, c}));
    // every expert reads exactly its own rows from the staged copy
    for (size_t e = 0; e < rows.size(); ++e) {
        INFO("expert " << e);
        CHECK(std::memcmp(staged.data() + in.staged_row[e] * D, x.data() + in.caller_row[e] * D,
                          static_cast<size_t>(rows[e] * D) * sizeof(float)) == 0);
    }
}

TEST_CASE("group inputs: equality is bitwise, and only the first and the previous expert are candidates", "[expert]") {
    const int64_t D = 4;
    std::vector<float> a = testing::random_normal(D, 7), last_bit = a, negzero = a, other = testing::random_normal(D, 8);
    last_bit[D - 1] = std::nextafter(a[D - 1], 1e9f);
    a[1] = 0.0f;
    negzero = a;
    negzero[1] = -0.0f; // equal as floats, different bits: a different input to the contract
    {
        const std::vector<int64_t> rows = {1, 1, 1};
        const std::vector<float> x = stack({a, last_bit, negzero});
        const gpu::GroupInputs in = gpu::plan_group_inputs(rows.data(), rows.size(), x.data(), D);
        CHECK(in.staged_rows == 3);
    }
    {
        const std::vector<float> other2 = testing::random_normal(D, 9);
        const std::vector<int64_t> rows = {1, 1, 1, 1, 1};
        const std::vector<float> x = stack({other, a, other2, a, other2});
        const gpu::GroupInputs in = gpu::plan_group_inputs(rows.data(), rows.size(), x.data(), D);
        // a at expert 3 repeats expert 1, which is neither the first nor the previous: staged again;
        // other2 at expert 4 repeats expert 2, not the previous (expert 3): staged again.
        CHECK(in.staged == std::vector<char>{1, 1, 1, 1, 1});
        CHECK(in.staged_rows == 5);
    }
    {
        // same bytes but a different row count is a different block
        const std::vector<int64_t> rows = {2, 1};
        const std::vector<float> x = stack({a, a, a});
        const gpu::GroupInputs in = gpu::plan_group_inputs(rows.data(), rows.size(), x.data(), D);
        CHECK(in.staged_rows == 3);
    }
}

TEST_CASE("group inputs: the assumed plan is the plan of rows that all repeat, and only of those", "[expert]") {
    // A one-token group is launched on assume_repeated_inputs before the comparison (backend_impl.cuh):
    // the plans must agree exactly when every row repeats, whatever the experts without rows.
    const int64_t D = 6;
    const std::vector<float> a = testing::random_normal(D, 11);
    std::vector<float> a_last_bit = a;
    a_last_bit[D - 1] = std::nextafter(a[D - 1], 1e9f);
    const std::vector<int64_t> rows = {0, 1, 1, 0, 1, 1};
    const gpu::GroupInputs assumed = gpu::assume_repeated_inputs(rows.data(), rows.size());
    CHECK(assumed.staged_rows == 1);
    CHECK(assumed.staged_row == std::vector<int64_t>{0, 0, 0, 1, 0, 0});
    const std::vector<float> repeated = stack({a, a, a, a});
    CHECK(gpu::same_plan(assumed, gpu::plan_group_inputs(rows.data(), rows.size(), repeated.data(), D)));
    for (size_t differing = 0; differing < 4; ++differing) {
        INFO("row " << differing << " differs in its last bit");
        std::vector<std::vector<float>> blocks(4, a);
        blocks[differing] = a_last_bit;
        const std::vector<float> x = stack(blocks);
        const gpu::GroupInputs real = gpu::plan_group_inputs(rows.data(), rows.size(), x.data(), D);
        CHECK_FALSE(gpu::same_plan(assumed, real));
        CHECK(real.staged_rows > assumed.staged_rows);
    }
    // blocks of different row counts are never assumed to repeat
    const std::vector<int64_t> uneven = {2, 1, 2};
    CHECK(gpu::assume_repeated_inputs(uneven.data(), uneven.size()).staged_rows == 3);
}
