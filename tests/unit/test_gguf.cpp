#include <gtest/gtest.h>

#include "format/gguf.h"

using namespace deltafin;

TEST(Gguf, Placeholder) { SUCCEED(); }
