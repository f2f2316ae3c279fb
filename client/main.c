/* SPDX-License-Identifier: MIT */
#include <stdio.h>
int main(void)
{
	fprintf(stderr, "rdmacp: not built yet\n");
	return 1;
}
