/* SPDX-License-Identifier: MIT */
/* What the plan_*.c files share (plan.h): not for callers outside them. */
#pragma once

#include <stdio.h>

/* ,"key":"value" (escaped) after the fields before it on a line. */
void plan_put_str(FILE *f, const char *key, const char *v);
