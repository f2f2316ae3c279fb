/* SPDX-License-Identifier: MIT */
/*
 * The receiver's FILES: each entry checked and accepted (or kept, or
 * refused), the FILES_ACK with what differs, RESUME for kept data, the
 * checksum skip level's digests, and FILE_DONE.
 */
#include "engine_rx.h"

/* The sender could not send an entry: a failed file on this side too. */
int rx_entry_failed(struct engine *e, const struct msg_entry_failed *ef)
{
	file_note_failure(e, ef->name, 0, ef->status, false, ef->text);
	/* A kept file whose answer we held: the sender could not send what we wait for. */
	for (uint32_t i = 0; i < FILE_TABLE; i++) {
		struct efile *f = file_at(e, i);

		if (f->used && f->kept_wait && f->name && !strcmp(f->name, ef->name)) {
			f->kept_wait = false;
			file_release(e, f);
			break;
		}
	}
	return 0;
}

/* A new entry in the file table, from its FILES record. */
static void rx_entry_init(struct engine *e, struct efile *f, const struct proto_file *pf)
{
	file_take(e, f, pf->id);
	f->ftype = pf->ftype;
	f->size = pf->size;
	f->meta = *pf;
	f->meta.name = f->meta.link = NULL;
	f->name = strdup(pf->name);
	ts_now(&f->t0);
}

/*
 * Take an entry or refuse it: its name (rx_check_name), then the directory,
 * symlink or temp file made for it. *ret_peer: refused for what the peer
 * sent, not for our disk.
 */
static uint32_t rx_entry_accept(struct engine *e, struct efile *f, const struct proto_file *pf,
				char *text, size_t textlen, bool *ret_peer)
{
	uint32_t code = rx_check_name(e, f, text, textlen, ret_peer);

	if (code != PERR_OK) {
		return code;
	}
	if (engine_probe(e) && pf->ftype == PROTO_FT_DIR) {
		return rx_probe_dir(e, f, text, textlen);
	}
	if (engine_probe(e) && pf->ftype == PROTO_FT_SYMLINK) {
		return rx_probe_symlink(e, f, pf->link, text, textlen);
	}
	if (pf->ftype == PROTO_FT_DIR) {
		code = rx_make_dir(e, f, text, textlen);
		if (code == PERR_OK) {
			code = engine_rx_dir(e, f, text, textlen);
		}
		/* One there already is kept (its metadata brought in line). */
		return code == PERR_OK && !(f->items & PROTO_ITEM_NEW) ? rx_kept_code(e) : code;
	}
	if (pf->ftype == PROTO_FT_SYMLINK) {
		return rx_make_symlink(e, f, pf->link, text, textlen);
	}
	if (engine_rx_accept(e, f, pf, &code, text, textlen, ret_peer) != ENGINE_DECLINED) {
		return code;
	}
	return rx_open_file(e, f, text, textlen);
}

/*
 * A refused entry is reported now and forgotten; directories and symlinks
 * are done the moment they exist; a regular file waits for its data, a
 * hard link for its directory's fsync (and maybe for the file it links to).
 */
static void rx_entry_settle(struct engine *e, struct efile *f, const struct proto_file *pf,
			    uint32_t code, bool peer)
{
	if (code == PERR_SUM_WANTED) {
		return; /* waits for the digests (rx_sum_decide) */
	}
	if (code == PERR_SKIPPED) {
		/* A file kept as it is may be linked to; its attributes may come next. */
		engine_rx_settled(e, f, ENGINE_RX_KEPT);
		file_note_kept(e, f);
		file_release(e, f);
	} else if (code == PERR_OK && engine_probe(e)) {
		/* A probe's answer resolves the entry: it would be copied (or made). */
		engine_rx_settled(e, f, ENGINE_RX_PLANNED);
		file_note_planned(e, f->name, f->ftype, f->ftype == PROTO_FT_REG ? f->size : 0);
		file_release(e, f);
	} else if (code != PERR_OK) {
		file_note_failure(e, f->name ? f->name : pf->name, pf->ftype, code, !peer,
				  file_fail_text(f));
		if (f->tfd >= 0 && f->dir >= 0) {
			rx_discard(e, f);
		}
		file_release(e, f);
	} else if (pf->ftype != PROTO_FT_REG && pf->ftype != PROTO_FT_HARDLINK) {
		file_note_committed(e, f, 0, NULL);
		file_release(e, f);
	}
}

/* Before its FILES_ACK: the bytes of f kept from a cut run, which the sender passes over. */
static int rx_send_resume(struct engine *e, const struct efile *f)
{
	struct msg m = { .type = MSG_RESUME };
	int r;

	m.u.resume.id = f->id;
	m.u.resume.count = 1;
	m.u.resume.r[0] = (struct proto_range){ .offset = 0, .len = f->kept };
	r = chan_queue(e->p->chan, &m);
	return r < 0 ? engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r)) : 0;
}

/*
 * A regular file or directory kept whose answer a feature holds
 * (PROTO_ITEM_WAIT): it answers later.
 */
static bool rx_kept_held(struct engine *e, struct efile *f, uint32_t code)
{
	return code == PERR_SKIPPED && (f->ftype == PROTO_FT_REG || f->ftype == PROTO_FT_DIR) &&
	       engine_rx_kept(e, f);
}

/* What differs, in a FILES_ACK entry: to a peer that knows it, for an entry taken or kept. */
static uint32_t rx_items_for_peer(const struct engine *e, const struct efile *f, uint32_t code)
{
	if (!(e->p->peer_caps & PROTO_CAP_ITEMIZE) || e->p->conceal ||
	    (code != PERR_OK && code != PERR_SKIPPED)) {
		return 0;
	}
	return f->items & PROTO_ITEMS_KNOWN;
}

/*
 * A file this receiver refused for permission: the text the sender hears
 * says whose side and who could not write (perm_where), or a user on the
 * other end is left to guess which machine, directory and user it was.
 */
static void rx_say_where(const struct engine *e, uint32_t code, char *text, size_t textlen)
{
	size_t n = strlen(text);

	if (code == PERR_PERMISSION && e->p->perm_where && n + 4 < textlen) {
		snprintf(text + n, textlen - n, " (%s)", e->p->perm_where);
	}
}

/*
 * One FILES entry into the table, checked and answered in *s; what it says
 * next (RESUME for kept data, --delta's SUMS) goes out before the answer.
 */
static int rx_files_entry(struct engine *e, struct proto_file *pf, struct proto_status *s,
			  bool *ret_answered)
{
	struct efile *f = file_at(e, pf->id % FILE_TABLE);
	char text[FILE_FAIL_TEXT_LEN] = "";
	bool peer = false;
	uint32_t code;
	int r = 0;

	/* Ids strictly increase; the table bounds the files in flight. */
	if (pf->id <= e->next_id || f->used) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "FILES: id %u out of order or too many files in flight", pf->id);
	}
	if (pf->ftype == PROTO_FT_HARDLINK && !(e->p->open_flags & PROTO_OPEN_HARDLINKS)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
				   "FILES: a hard link in a session without hard links");
	}
	e->next_id = pf->id;
	rx_entry_init(e, f, pf);
	code = rx_entry_accept(e, f, pf, text, sizeof(text), &peer);
	f->kept_wait = rx_kept_held(e, f, code);
	*s = (struct proto_status){ .id = pf->id,
				    .status = proto_err_for_peer(code, e->p->peer_caps),
				    .items = rx_items_for_peer(e, f, code) |
					     (f->kept_wait ? PROTO_ITEM_WAIT : 0) };
	*ret_answered = true;
	if (code != PERR_OK && code != PERR_SKIPPED && code != PERR_SUM_WANTED) {
		rx_say_where(e, code, text, sizeof(text));
		file_fail(f, code, "%s", text);
		s->text = strdup(file_fail_text(f));
	}
	if (code == PERR_OK && f->kept > 0) {
		r = rx_send_resume(e, f);
	}
	if (r >= 0 && code == PERR_OK) {
		r = engine_rx_answered(e, f);
	}
	if (r >= 0 && !f->kept_wait) {
		rx_entry_settle(e, f, pf, code, peer);
	} else if (r >= 0) {
		/* Kept as it is (links to it may go on); counted once answered. */
		engine_rx_settled(e, f, ENGINE_RX_KEPT);
	}
	return r < 0 ? r : 0;
}

int rx_files(struct engine *e, struct msg_files *mf)
{
	struct msg ack = { .type = MSG_FILES_ACK };
	struct proto_status *st;
	bool failed = e->failed;
	int r = 0;

	st = calloc(mf->count ? mf->count : 1, sizeof(*st));
	if (!st) {
		return engine_fail(e, PERR_INTERNAL, -ENOMEM, "out of memory");
	}
	engine_rx_batch(e);
	/* A feature may end the session on what the last batch left undone. */
	r = !failed && e->failed ? e->fail_r : 0;
	ack.u.files_ack.st = st;
	for (size_t i = 0; i < mf->count && r == 0; i++) {
		bool answered = false;

		r = rx_files_entry(e, &mf->files[i], &st[ack.u.files_ack.count], &answered);
		/* Its text is freed below. */
		ack.u.files_ack.count += answered;
	}
	if (r == 0) {
		r = chan_queue(e->p->chan, &ack);
		if (r < 0) {
			engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
		}
	}
	for (size_t i = 0; i < ack.u.files_ack.count; i++) {
		free(st[i].text);
	}
	free(st);
	return r;
}

/*
 * A file kept after the digests were compared (skip level checksum): looked
 * at again, as the hashing may have taken a while. One no longer there as
 * hashed is copied over after all.
 */
static uint32_t rx_keep_file_again(struct engine *e, struct efile *f, char *text, size_t textlen)
{
	struct stat st;

	if (fstatat(e->dirs[f->dir].fd, f->leaf, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode) || (uint64_t)st.st_size != f->size) {
		f->items |= PROTO_ITEM_CHECKSUM;
		return engine_probe(e) ? rx_probe_copy(e, f, text, textlen)
				       : rx_open_temp(e, f, text, textlen);
	}
	return rx_keep_file(e, f, &st, text, textlen);
}

/*
 * Both digests are here: the same contents keep the file (SKIPPED), others
 * (or a side that could not hash) copy it as without a skip level. The
 * second FILES_ACK entry for the id says which.
 */
static int rx_sum_decide(struct engine *e, struct efile *f)
{
	struct msg ack = { .type = MSG_FILES_ACK };
	struct proto_status st = { .id = f->id };
	char text[FILE_FAIL_TEXT_LEN] = "";
	uint32_t code;
	int r;

	(void)sums_want(e, f, false);
	if (sums_match(e, f)) {
		code = rx_keep_file_again(e, f, text, sizeof(text));
	} else {
		f->items |= PROTO_ITEM_CHECKSUM;
		code = engine_probe(e) ? rx_probe_copy(e, f, text, sizeof(text))
				       : rx_open_temp(e, f, text, sizeof(text));
	}
	f->kept_wait = rx_kept_held(e, f, code);
	st.status = proto_err_for_peer(code, e->p->peer_caps);
	st.items = rx_items_for_peer(e, f, code) | (f->kept_wait ? PROTO_ITEM_WAIT : 0);
	if (code != PERR_OK && code != PERR_SKIPPED) {
		rx_say_where(e, code, text, sizeof(text));
		file_fail(f, code, "%s", text);
		st.text = (char *)file_fail_text(f);
	}
	ack.u.files_ack.count = 1;
	ack.u.files_ack.st = &st;
	r = chan_queue(e->p->chan, &ack);
	if (r < 0) {
		return engine_fail(e, PERR_IO, r, "control channel: %s", strerror(-r));
	}
	if (!f->kept_wait) {
		rx_entry_settle(e, f, &f->meta, code, false);
	} else {
		engine_rx_settled(e, f, ENGINE_RX_KEPT);
	}
	return 0;
}

/* Our own digest of the file at the destination name (engine_sums.c), while it still asks. */
int rx_sum_done(struct engine *e, struct efile *f, int r, const uint8_t hash[HASH_LEN])
{
	if (!sums_wanted(e, f)) {
		return 0;
	}
	return sums_own(e, f, r, hash) > 0 ? rx_sum_decide(e, f) : 0;
}

/* The sender's digests: one for each file we answered SUM_WANTED, once. */
int rx_sums(struct engine *e, const struct msg_sums *ms)
{
	for (size_t i = 0; i < ms->count; i++) {
		const struct proto_sum *ps = &ms->sums[i];
		struct efile *f = file_by_id(e, ps->id);
		int r;

		r = f && sums_wanted(e, f) ? sums_peer(e, f, ps->status, ps->hash) : -EBADMSG;
		if (r < 0) {
			return engine_fail(e, PERR_PROTOCOL, -EBADMSG,
					   "SUMS for id %u, not asked for", ps->id);
		}
		r = r > 0 ? rx_sum_decide(e, f) : 0;
		if (r < 0) {
			return r;
		}
	}
	return 0;
}

int rx_file_done(struct engine *e, const struct msg_file_done *d)
{
	struct efile *f = file_by_id(e, d->id);

	/* Nor for one we have not answered yet (SUM_WANTED): it has nowhere to go. */
	if (!f || f->got_done || sums_wanted(e, f)) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_DONE for unknown file id %u",
				   d->id);
	}
	/* Its ZEROS came before it (one channel): what is neither kept nor zeros is payload. */
	if (d->bytes > f->size - f->kept - engine_file_unsent_bytes(e, f) ||
	    d->bytes < f->recv_bytes) {
		return engine_fail(e, PERR_PROTOCOL, -EBADMSG, "FILE_DONE: impossible byte count");
	}
	f->got_done = true;
	f->done_status = d->status;
	f->done_bytes = d->bytes;
	memcpy(f->done_hash, d->hash, HASH_LEN);
	/*
	 * The sender's reason waits in fail_text (unused until the file fails;
	 * rx_maybe_finish fails it with this one unless it failed here first,
	 * and then file_fail has written its own reason over this).
	 */
	if (d->status != PERR_OK && !f->failed && file_fail_buf(f)) {
		snprintf(f->fail_text, FILE_FAIL_TEXT_LEN, "sender: %.200s", d->text);
	}
	return rx_maybe_finish(e, f);
}
