// Catch2 2.x needs one translation unit to define main; v3 links Catch2Main instead.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
