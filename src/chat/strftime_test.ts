import { assertEquals } from "../../tests/support/assert.ts";
import { strftime } from "./strftime.ts";

// Expected: glibc's strftime in the C locale (Python's time.strftime) for the same times.
const FORMAT = "%a %A %b %h %B %C %d %D %e %F %H %I %j %k %l %m %M %p %P %r %R %S %T %u %U " +
  "%w %W %x %X %y %Y %% %c %Q";

const CASES: [number[], string][] = [
  [
    [2024, 7, 26, 9, 5, 3],
    "Fri Friday Jul Jul July 20 26 07/26/24 26 2024-07-26 09 09 208  9  9 07 05 AM am " +
    "09:05:03 AM 09:05 03 09:05:03 5 29 5 30 07/26/24 09:05:03 24 2024 % Fri Jul 26 09:05:03 2024 %Q",
  ],
  [
    [2023, 1, 1, 0, 0, 0],
    "Sun Sunday Jan Jan January 20 01 01/01/23  1 2023-01-01 00 12 001  0 12 01 00 AM am " +
    "12:00:00 AM 00:00 00 00:00:00 7 01 0 00 01/01/23 00:00:00 23 2023 % Sun Jan  1 00:00:00 2023 %Q",
  ],
  [
    [2024, 12, 31, 23, 59, 59],
    "Tue Tuesday Dec Dec December 20 31 12/31/24 31 2024-12-31 23 11 366 23 11 12 59 PM pm " +
    "11:59:59 PM 23:59 59 23:59:59 2 52 2 53 12/31/24 23:59:59 24 2024 % Tue Dec 31 23:59:59 2024 %Q",
  ],
  [
    [2021, 3, 7, 12, 30, 0],
    "Sun Sunday Mar Mar March 20 07 03/07/21  7 2021-03-07 12 12 066 12 12 03 30 PM pm " +
    "12:30:00 PM 12:30 00 12:30:00 7 10 0 09 03/07/21 12:30:00 21 2021 % Sun Mar  7 12:30:00 2021 %Q",
  ],
];

Deno.test("strftime matches C's in the C locale, whatever the host's language", () => {
  for (const [[y, mo, d, h, mi, s], expected] of CASES) {
    assertEquals(strftime(new Date(y, mo - 1, d, h, mi, s), FORMAT), expected);
  }
  assertEquals(strftime(new Date(2024, 6, 26), "Today Date: %d %b %Y"), "Today Date: 26 Jul 2024");
  assertEquals(strftime(new Date(2024, 6, 26), "100%"), "100%");
});
