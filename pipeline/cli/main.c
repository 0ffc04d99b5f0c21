/* pipeline/cli/main.c: PLACEHOLDER entry point, being written. */
#include <stdio.h>
int main(void) { fputs("spanfence: not built yet\n", stderr); return 2; }
