/* SPDX-License-Identifier: MIT */
/*
 * Memory windows per RDMA device, asked once per daemon (windows_check.h).
 * A device is known by its name and node GUID, so one that went away and
 * came back as another device is asked again, and an answer that was an
 * error (the device busy or gone while it was asked) is never kept.
 */
#include "windows_check.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "sysfile.h"
#include "xport.h"

static int ask_verbs(const char *dev, char *why, size_t whylen)
{
	const char *devs[1] = { dev };

	return xport_verbs_windows(NULL, devs, 1, why, whylen);
}

struct windows_table *windows_table_daemon(void)
{
	static struct windows_table t = { .sysfs = RDMADEV_SYSFS, .ask = ask_verbs };

	return &t;
}

/* The device's node GUID as sysfs has it ("" when unreadable). */
static void dev_guid(const struct windows_table *t, const char *name, char *guid, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s/node_guid", t->sysfs, name);
	if (sysfile_read_line(path, guid, len) < 0) {
		guid[0] = '\0';
	}
}

static void dev_ask(struct windows_table *t, struct windows_dev *d)
{
	dev_guid(t, d->name, d->guid, sizeof(d->guid));
	d->answer = t->ask(d->name, d->why, sizeof(d->why));
	t->asked++;
}

void windows_table_refresh(struct windows_table *t)
{
	DIR *dir = opendir(t->sysfs);
	struct dirent *de;

	t->n = 0;
	if (!dir) {
		return; /* no RDMA device on this host */
	}
	while ((de = readdir(dir)) && t->n < WINDOWS_CHECK_MAX) {
		struct windows_dev *d = &t->dev[t->n];
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || len >= sizeof(d->name) ||
		    !rdmadev_name_ok(de->d_name)) {
			continue;
		}
		memcpy(d->name, de->d_name, len + 1);
		dev_ask(t, d);
		log_debug("memory windows: %s", d->why);
		t->n++;
	}
	closedir(dir);
}

/* Device name's answer: the table's, or asked now (into one, a scratch entry). */
static const struct windows_dev *dev_answer(struct windows_table *t, const char *name,
					    struct windows_dev *one)
{
	char guid[sizeof(one->guid)];

	dev_guid(t, name, guid, sizeof(guid));
	for (unsigned i = 0; i < t->n; i++) {
		const struct windows_dev *d = &t->dev[i];

		if (strcmp(d->name, name) == 0 && strcmp(d->guid, guid) == 0 && d->answer >= 0) {
			return d;
		}
	}
	snprintf(one->name, sizeof(one->name), "%s", name);
	dev_ask(t, one);
	return one;
}

int windows_table_answer(struct windows_table *t, const char *const *devs, unsigned n, char *why,
			 size_t whylen)
{
	int r = n > 0 ? 1 : -ENODEV;

	snprintf(why, whylen, "no RDMA device");
	for (unsigned i = 0; i < n; i++) {
		struct windows_dev one;
		const struct windows_dev *d = dev_answer(t, devs[i], &one);

		/* The device that decides says why: the first refusal, or the last yes. */
		if (d->answer < 1 || r == 1) {
			snprintf(why, whylen, "%s", d->why);
		}
		if (d->answer < 1) {
			return d->answer;
		}
	}
	return r;
}
