// What the drivers share about their arguments and messages.
#include "tools/command_line.h"

#include "gtest/gtest.h"

namespace commir {
namespace {

// Errors about a program name its file, with the line:col the message carries.
TEST(MessageInFile, LocatedMessageGetsTheFileBeforeItsLocation) {
  EXPECT_EQ(MessageInFile("a.commir", "4:8: cannot search layouts of 'call'"),
            "a.commir:4:8: cannot search layouts of 'call'");
}

TEST(MessageInFile, UnlocatedMessageGetsTheFileFirst) {
  EXPECT_EQ(MessageInFile("a.commir", "no function @nope"), "a.commir: no function @nope");
  // Numbers that are not a LINE:COL prefix are part of the message.
  EXPECT_EQ(MessageInFile("a.commir", "4 devices: none"), "a.commir: 4 devices: none");
  EXPECT_EQ(MessageInFile("a.commir", "4:x: y"), "a.commir: 4:x: y");
  EXPECT_EQ(MessageInFile("a.commir", "4:8:9"), "a.commir: 4:8:9");
  EXPECT_EQ(MessageInFile("<stdin>", ""), "<stdin>: ");
}

TEST(ParseIntInRange, Bounds) {
  int64_t n = 0;
  EXPECT_TRUE(ParseIntInRange("5", 1, 5, n));
  EXPECT_EQ(n, 5);
  EXPECT_FALSE(ParseIntInRange("6", 1, 5, n));
  EXPECT_FALSE(ParseIntInRange("1099511627776", 1, int64_t{1} << 30, n));
  EXPECT_FALSE(ParseIntInRange("", 1, 5, n));
}

}  // namespace
}  // namespace commir
