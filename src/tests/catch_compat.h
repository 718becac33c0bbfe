// One include for Catch2 2.13 (Debian 12's system package) and Catch2 v3 (the wrap).
#pragma once

#if defined(COLI_CATCH2_V3)
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#else
#include <catch2/catch.hpp>
#endif // COLI_CATCH2_V3
