/* SPDX-License-Identifier: MIT */
/*
 * A regular file's end-to-end digest: the one choice, made once a session,
 * that every path making or checking one takes (the sender's stream and
 * FILE_DONE, the receiver's commit, --partial's journal read back, the
 * skip level checksum and a device's read back on the sums worker, a
 * relay's source digest). Where both ends announce PROTO_CAP_FILE_TREE,
 * a file of more than one chunk is checked by its chunk tree (hash.h,
 * file_hash_init_tree, at the session's chunk size), whose chunks hash
 * apart, on any worker; else, and for a file of one chunk or less (a
 * packed one among them), by the stream of its bytes. Both ends know the
 * caps, the chunk size and the file's size, so they choose alike.
 */
#include "engine-internal.h"

#include "hello.h"

void engine_digest_choose(struct engine *e)
{
	const struct engine_params *p = e->p;

	/* A probe moves no data: its chunk size is not the peer's. */
	e->tree_chunk = p->x && (p->peer_caps & PROTO_CAP_FILE_TREE) &&
				(hello_local_caps() & PROTO_CAP_FILE_TREE)
			    ? p->chunk_size
			    : 0;
}

uint32_t engine_digest_chunk(const struct engine *e, uint64_t size)
{
	return size > e->tree_chunk ? e->tree_chunk : 0;
}

uint32_t engine_digest_tree(const struct engine *e, const struct efile *f)
{
	/* --delta's checked by chunk digests: the same tree, made its own way. */
	return f->tree ? e->p->chunk_size : engine_digest_chunk(e, f->size);
}

int engine_hash_start(const struct engine *e, struct efile *f)
{
	return file_hash_init_tree(&f->hash, engine_digest_chunk(e, f->size));
}

/*
 * The one rule of where a tree's bytes are hashed, for every path of both
 * roles: each chunk's own digest is made where the chunk is handled (the
 * worker that reads, copies, opens or digests it; the loop where there are
 * no workers) and the loop folds the digests into f's tree in file order
 * (file_hash_chunk). --delta's tree (f->tree) is fed its own way.
 */
bool engine_digest_folds(const struct engine *e, const struct efile *f)
{
	return !f->tree && engine_digest_chunk(e, f->size) > 0;
}

/*
 * Sender: is the own digest of chunk c of f made in the job that seals it,
 * fed block by block while the bytes are clear and in cache (one pass over
 * them), rather than apart (WJOB_DIGEST) once the chunk is read? A tree
 * file's chunk (engine_digest_folds) with a payload, sealed on a worker, its
 * digest not made yet (rails' second seal of a chunk makes none). The one
 * rule the read's end (tx_chunk_read), the post (tx_post_chunk) and the
 * seal job's builder (engine_seal.c) take; its digest is folded in file
 * order once back (tx_seal_digested).
 */
bool engine_digest_in_seal(const struct engine *e, const struct efile *f, const struct chunk *c)
{
	return e->hashers && e->sealed && !c->packed && !c->zero && !c->digested &&
	       engine_digest_folds(e, f);
}

/*
 * Can the chunk a descriptor names be one of a tree file's (a worker that
 * opens a sealed slot learns only its descriptor, not the file's size)?
 * A chunk past offset 0, or a first chunk that is whole; never a pack.
 */
bool engine_digest_may_fold(const struct proto_desc *d, uint32_t tree_chunk)
{
	return tree_chunk > 0 && d->file_id != 0 && (d->offset > 0 || d->len == tree_chunk);
}
