/* SPDX-License-Identifier: MIT */
/*
 * rdmacp doctor's findings (doctor.h): each problem as it is found, then
 * everything on stdout, as one JSON object (--json) or for people.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "doctor.h"
#include "fabric_check.h"
#include "log.h"
#include "output.h"
#include "xport.h"

void doctor_problem(struct doctor *d, bool error, const char *fix, const char *fmt, ...)
{
	struct doctor_problem *p;
	va_list ap;

	if (d->nproblems == DOCTOR_MAX_PROBLEMS) {
		return;
	}
	p = &d->problems[d->nproblems++];
	p->error = error;
	va_start(ap, fmt);
	vsnprintf(p->what, sizeof(p->what), fmt, ap);
	va_end(ap);
	snprintf(p->fix, sizeof(p->fix), "%s", fix);
}

const char *doctor_uring_sysctl_meaning(int v)
{
	switch (v) {
	case -1:
		return "no such sysctl (kernel before 6.6): io_uring is not switched off there";
	case 0:
		return "0: enabled for all processes";
	case 1:
		return "1: only for processes in kernel.io_uring_group or with CAP_SYS_ADMIN";
	case 2:
		return "2: disabled for all processes";
	default:
		return "unknown value";
	}
}

static void json_limit(FILE *f, uint64_t v)
{
	if (v == (uint64_t)RLIM_INFINITY) {
		fputs("null", f);
	} else {
		fprintf(f, "%" PRIu64, v);
	}
}

static void print_json_port(FILE *f, const struct doctor_port *pt)
{
	fprintf(f, "{\"port\":%u,\"state\":", pt->num);
	output_json_string(f, pt->state);
	fputs(",\"link_layer\":", f);
	output_json_string(f, pt->link_layer);
	fprintf(f, ",\"active_mtu\":%u,\"gid_table_len\":%u,\"gids\":[", pt->active_mtu,
		pt->gid_tbl_len);
	for (unsigned g = 0; g < pt->ngids; g++) {
		const struct doctor_gid *gd = &pt->gids[g];

		fprintf(f, "%s{\"index\":%u,\"gid\":", g ? "," : "", gd->index);
		output_json_string(f, gd->addr);
		fputs(",\"type\":", f);
		output_json_string(f, gd->type);
		fprintf(f, ",\"ipv4_mapped\":%s,\"ipv4\":", gd->ipv4_mapped ? "true" : "false");
		output_json_string(
		    f, gd->ipv4_mapped && strrchr(gd->addr, ':') ? strrchr(gd->addr, ':') + 1 : "");
		fputs(",\"netdev\":", f);
		output_json_string(f, gd->netdev);
		fputc('}', f);
	}
	fputs("]}", f);
}

/* The fabric's facts (doctor_fabric.c): a "fabric" array, with its leading comma. */
static void print_json_fabric(FILE *f, const struct doctor *d)
{
	fputs(",\"fabric\":[", f);
	for (size_t i = 0; d->fabric && i < d->fabric->nfacts; i++) {
		fputs(i ? "," : "", f);
		output_json_string(f, d->fabric->facts[i]);
	}
	fputc(']', f);
}

static void print_human_fabric(const struct doctor *d)
{
	if (!d->fabric || d->fabric->nfacts == 0) {
		return;
	}
	printf("fabric:\n");
	for (size_t i = 0; i < d->fabric->nfacts; i++) {
		printf("  %s\n", d->fabric->facts[i]);
	}
}

void doctor_print_json(const struct doctor *d, bool ok)
{
	FILE *f = stdout;

	fputs("{\"verbs\":{\"available\":", f);
	fputs(d->verbs_ok ? "true" : "false", f);
	fputs(",\"reason\":", f);
	output_json_string(f, d->verbs_ok ? "" : d->verbs_why);
	fputs("},\"devices\":[", f);
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct doctor_device *dev = &d->devices[i];

		fprintf(f, "%s{\"name\":", i ? "," : "");
		output_json_string(f, dev->name);
		fputs(",\"transport\":", f);
		output_json_string(f, dev->transport);
		fprintf(f, ",\"verbs_path\":\"%s\"", xport_path_name(dev->path));
		fputs(",\"error\":", f);
		output_json_string(f, dev->error);
		fputs(",\"ports\":[", f);
		for (unsigned p = 0; p < dev->nports; p++) {
			fputs(p ? "," : "", f);
			print_json_port(f, &dev->ports[p]);
		}
		fputs("]}", f);
	}
	fputc(']', f);
	print_json_fabric(f, d);
	fprintf(f, ",\"memlock\":{\"need\":%" PRIu64 ",\"limit\":", d->pool_need);
	json_limit(f, d->memlock_cur);
	fputs(",\"limit_hard\":", f);
	json_limit(f, d->memlock_max);
	fprintf(f, ",\"cap_ipc_lock\":%s,\"ok\":%s,\"tcp_pool\":%" PRIu64 "}",
		d->cap_ipc_lock > 0 ? "true" : "false", d->memlock_ok ? "true" : "false",
		d->tcp_pool);
	fputs(",\"io_uring\":{\"io_uring_disabled\":", f);
	if (d->uring_sysctl < 0) {
		fputs("null", f);
	} else {
		fprintf(f, "%d", d->uring_sysctl);
	}
	fputs(",\"meaning\":", f);
	output_json_string(f, doctor_uring_sysctl_meaning(d->uring_sysctl));
	fprintf(f, ",\"ok\":%s,\"error\":", d->uring_ok ? "true" : "false");
	output_json_string(f, d->uring_err ? strerror(-d->uring_err) : "");
	fputs(",\"missing_ops\":", f);
	output_json_string(f, d->uring_missing_ops);
	fprintf(f, "},\"hugepages\":{\"total\":%ld,\"free\":%ld,\"size_kb\":%ld,\"thp\":",
		d->huge_total, d->huge_free, d->huge_size_kb);
	output_json_string(f, d->thp);
	fprintf(f, ",\"pool_uses_hugepages\":%s},\"certificates\":[",
		d->pool_huge ? "true" : "false");
	for (size_t i = 0; i < d->ncerts; i++) {
		const struct doctor_cert *c = &d->certs[i];

		fprintf(f, "%s{\"what\":", i ? "," : "");
		output_json_string(f, c->what);
		fputs(",\"file\":", f);
		output_json_string(f, c->file);
		fputs(",\"error\":", f);
		output_json_string(f, c->error);
		fputs(",\"subject\":", f);
		output_json_string(f, c->error[0] ? "" : c->e.subject);
		fputs(",\"not_after\":", f);
		output_json_string(f, c->error[0] ? "" : c->e.not_after);
		fprintf(f, ",\"days_left\":%d,\"expired\":%s}", c->error[0] ? 0 : c->e.days_left,
			!c->error[0] && c->e.expired ? "true" : "false");
	}
	fputs("],\"problems\":[", f);
	for (size_t i = 0; i < d->nproblems; i++) {
		fprintf(f, "%s{\"severity\":\"%s\",\"what\":", i ? "," : "",
			d->problems[i].error ? "error" : "warning");
		output_json_string(f, d->problems[i].what);
		fputs(",\"fix\":", f);
		output_json_string(f, d->problems[i].fix);
		fputc('}', f);
	}
	fprintf(f, "],\"ok\":%s}\n", ok ? "true" : "false");
}

void doctor_human_bytes(uint64_t v, char *buf, size_t len)
{
	if (v == (uint64_t)RLIM_INFINITY) {
		snprintf(buf, len, "unlimited");
	} else if (v >= (1u << 20) && v % (1u << 20) == 0) {
		snprintf(buf, len, "%" PRIu64 " MiB", v >> 20);
	} else if (v >= 1024 && v % 1024 == 0) {
		snprintf(buf, len, "%" PRIu64 " KiB", v >> 10);
	} else {
		snprintf(buf, len, "%" PRIu64 " bytes", v);
	}
}

static void print_human_devices(const struct doctor *d)
{
	if (d->ndevices == 0) {
		printf("RDMA devices: none (%s): verbs unavailable, tcp only\n", d->verbs_why);
		return;
	}
	if (d->verbs_ok) {
		printf("RDMA devices: %zu\n", d->ndevices);
	} else {
		printf("RDMA devices: %zu (verbs unusable: %s)\n", d->ndevices, d->verbs_why);
	}
	for (size_t i = 0; i < d->ndevices; i++) {
		const struct doctor_device *dev = &d->devices[i];

		printf("  %s (%s, verbs lanes: %s)%s%s\n", dev->name, dev->transport,
		       dev->path == XPORT_PATH_WRITE_SEND  ? "RDMA WRITE + SEND, write_send"
		       : dev->path == XPORT_PATH_WRITE_IMM ? "RDMA WRITE WITH IMMEDIATE, write_imm"
							   : "none",
		       dev->error[0] ? ": " : "", dev->error);
		for (unsigned p = 0; p < dev->nports; p++) {
			const struct doctor_port *pt = &dev->ports[p];

			printf("    port %u: %s, %s, active MTU %u\n", pt->num, pt->state,
			       pt->link_layer, pt->active_mtu);
			for (unsigned g = 0; g < pt->ngids; g++) {
				const struct doctor_gid *gd = &pt->gids[g];

				printf("      GID %-3u %-7s %s%s%s%s\n", gd->index, gd->type,
				       gd->addr, gd->netdev[0] ? " on " : "", gd->netdev,
				       gd->ipv4_mapped && !strcmp(gd->type, "RoCE v2")
					   ? "  <- RoCE v2 over IPv4 (rdma_cm)"
					   : "");
			}
			if (pt->ngids == 0) {
				printf("      no GIDs\n");
			}
		}
	}
}

void doctor_print_human(const struct doctor *d, bool ok)
{
	char need[32], cur[32], max[32];

	print_human_devices(d);
	print_human_fabric(d);
	doctor_human_bytes(d->pool_need, need, sizeof(need));
	doctor_human_bytes(d->memlock_cur, cur, sizeof(cur));
	doctor_human_bytes(d->memlock_max, max, sizeof(max));
	printf("memlock: limit %s (hard %s), verbs pins %s (the pool for io_uring and each "
	       "device), CAP_IPC_LOCK %s: %s\n",
	       cur, max, need, d->cap_ipc_lock > 0 ? "yes" : "no",
	       d->memlock_ok	 ? "ok"
	       : d->tcp_pool > 0 ? "TOO SMALL for verbs (tcp fits a smaller pool)"
				 : "TOO SMALL");
	printf("io_uring: kernel.io_uring_disabled %s; queue init %s%s\n",
	       doctor_uring_sysctl_meaning(d->uring_sysctl), d->uring_ok ? "ok" : "FAILED: ",
	       d->uring_ok ? "" : (d->uring_err ? strerror(-d->uring_err) : d->uring_missing_ops));
	printf("huge pages: %ld total, %ld free, %ld kB each; transparent huge pages [%s]; "
	       "pool on %s pages\n",
	       d->huge_total, d->huge_free, d->huge_size_kb, d->thp,
	       d->pool_huge ? "2 MiB" : "4 KiB");
	for (size_t i = 0; i < d->ncerts; i++) {
		const struct doctor_cert *c = &d->certs[i];
		char esc[sizeof(c->e.subject) * 4], fesc[sizeof(c->file) * 4];

		log_escape(c->file, fesc, sizeof(fesc));
		if (c->error[0]) {
			printf("%s: %s: %s\n", c->what, fesc, c->error);
		} else {
			printf("%s: %s: %s, expires %s (%s %d days)\n", c->what, fesc,
			       log_escape(c->e.subject, esc, sizeof(esc)), c->e.not_after,
			       c->e.expired ? "EXPIRED," : "in", c->e.days_left);
		}
	}
	if (d->nproblems == 0) {
		printf("no problems found\n");
	}
	for (size_t i = 0; i < d->nproblems; i++) {
		printf("%s: %s\n  fix: %s\n", d->problems[i].error ? "ERROR" : "warning",
		       d->problems[i].what, d->problems[i].fix);
	}
	printf("%s\n",
	       ok ? (d->verbs_ok ? "ready: tcp and verbs" : "ready: tcp (verbs unavailable)")
		  : "NOT ready: fix the errors above");
}
