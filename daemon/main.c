/* SPDX-License-Identifier: MIT */
#include <stdio.h>
int main(void)
{
	fprintf(stderr, "rdmacpd: not built yet\n");
	return 1;
}
