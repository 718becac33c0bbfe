// The expert tier's placement policy on the host: profile parsing, order, budget clamp and
// least-loaded whole-expert assignment over devices of unequal free memory.
#include "catch_compat.h"
#include "tier/placement.h"

using namespace coli::tier;

namespace {
constexpr uint64_t GB = 1000000000ull;
}

TEST_CASE("pin profiles parse strictly and name the line of an error", "[placement]") {
    Profile p;
    std::string why;
    REQUIRE(parse_profile("# colibri pin profile v1\n0 3 100\n\n1 0 7  # comment\n", "p.txt", 2, 4, &p, &why));
    CHECK(p.counts.size() == 2);
    CHECK(p.counts.at({0, 3}) == 100);
    CHECK_FALSE(parse_profile("0 3\n", "p.txt", 2, 4, &p, &why));
    CHECK(why.find("p.txt:1:") != std::string::npos);
    CHECK_FALSE(parse_profile("0 1 5\n0 x 5\n", "p.txt", 2, 4, &p, &why));
    CHECK(why.find("p.txt:2:") != std::string::npos);
    CHECK_FALSE(parse_profile("2 0 5\n", "p.txt", 2, 4, &p, &why));
    CHECK(why.find("outside the store") != std::string::npos);
    CHECK_FALSE(parse_profile("0 1 5\n0 1 6\n", "p.txt", 2, 4, &p, &why));
    CHECK(why.find("appears twice") != std::string::npos);
    CHECK_FALSE(parse_profile("0 1 -5\n", "p.txt", 2, 4, &p, &why));
    Profile back;
    REQUIRE(parse_profile(format_profile(p.counts.empty() ? Profile{{{{1, 2}, 9}}} : p), "x", 2, 4, &back, &why));
}

TEST_CASE("placement order: hottest first, then fill in store order", "[placement]") {
    Profile p;
    p.counts = {{{1, 1}, 5}, {{0, 2}, 9}, {{0, 0}, 5}};
    CHECK(placement_order(p, 2, 3, false) == std::vector<ExpertKey>{{0, 2}, {0, 0}, {1, 1}});
    const auto filled = placement_order(p, 2, 3, true);
    REQUIRE(filled.size() == 6);
    CHECK(std::vector<ExpertKey>(filled.begin() + 3, filled.end()) == std::vector<ExpertKey>{{0, 1}, {1, 0}, {1, 2}});
}

TEST_CASE("the budget is a total, clamped per device to free minus dense minus reserve", "[placement]") {
    const std::vector<DeviceCapacity> devs = {{0, 10 * GB, 1 * GB}, {1, 6 * GB, 0}};
    Budget b;
    b.reserve = 2 * GB;
    b.requested = 100 * GB;
    Plan p = plan_placement(devs, b, {}, GB);
    CHECK(p.devices[0].cap == 7 * GB); // 10 - 1 - 2
    CHECK(p.devices[1].cap == 4 * GB); // 6 - 0 - 2
    CHECK(p.requested == 100 * GB);
    CHECK(p.effective == 11 * GB);
    b.requested = 5 * GB;
    p = plan_placement(devs, b, {}, GB);
    CHECK(p.effective == 5 * GB);
    b.automatic = true;
    p = plan_placement(devs, b, {}, GB);
    CHECK(p.effective == 11 * GB);
    // A device whose dense set and reserve exceed its free memory gets nothing.
    p = plan_placement({{0, 2 * GB, 1 * GB}}, b, {{0, 0}}, GB);
    CHECK(p.devices[0].cap == 0);
    CHECK(p.device_of.empty());
    REQUIRE(!p.log.empty());
}

TEST_CASE("experts go whole to the least-loaded device that can hold them", "[placement]") {
    // Unequal devices: caps 7 GB and 4 GB, experts of 1.5 GB, budget 100 GB (clamped to 11).
    const std::vector<DeviceCapacity> devs = {{0, 10 * GB, 1 * GB}, {1, 6 * GB, 0}};
    Budget b;
    b.reserve = 2 * GB;
    b.requested = 100 * GB;
    std::vector<ExpertKey> order;
    for (int e = 0; e < 10; ++e) order.push_back({0, e});
    const uint64_t size = 1500000000ull;
    const Plan p = plan_placement(devs, b, order, size);
    // least loaded: 0,1,0,1,0,1 (device 1 full at 3 x 1.5 = 4.5 > 4? no: 2 experts = 3 GB, a third would be 4.5)
    CHECK(p.device_of.at({0, 0}) == 0);
    CHECK(p.device_of.at({0, 1}) == 1);
    CHECK(p.device_of.at({0, 2}) == 0);
    CHECK(p.device_of.at({0, 3}) == 1);
    CHECK(p.devices[1].experts == 2); // 3 GB used of 4; a third would need 4.5
    CHECK(p.devices[0].experts == 4); // 6 GB of 7
    CHECK(p.device_of.size() == 6);   // whole experts only; 4 stay on the CPU
    for (const DevicePlan &d : p.devices) CHECK(d.assigned <= d.cap);
    // The total budget binds before the devices do.
    b.requested = 4 * GB;
    const Plan q = plan_placement(devs, b, order, size);
    CHECK(q.device_of.size() == 2);
    CHECK(q.devices[0].experts == 1);
    CHECK(q.devices[1].experts == 1);
}
