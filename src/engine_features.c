/* SPDX-License-Identifier: MIT */
/*
 * The engine's features, in the order the core calls them (engine_feature.h):
 * the one place that lists them. A new feature is a file of its own with its
 * struct engine_feature, and a line here.
 */
#include "engine-internal.h"

extern const struct engine_feature engine_feature_sums, engine_feature_hashers,
    engine_feature_rails, engine_feature_partial, engine_feature_links, engine_feature_delete,
    engine_feature_xattrs, engine_feature_delta, engine_feature_pack, engine_feature_bench;

const struct engine_feature *const engine_features[] = {
	/* Workers first: at teardown their jobs go before what they hold. */
	&engine_feature_sums,
	&engine_feature_hashers,
	/* A lost lane's work goes on the others before the role posts more. */
	&engine_feature_rails,
	&engine_feature_partial,
	&engine_feature_links,
	&engine_feature_delete,
	&engine_feature_xattrs,
	&engine_feature_delta,
	&engine_feature_pack,
	&engine_feature_bench,
};

const unsigned engine_nfeatures = sizeof(engine_features) / sizeof(engine_features[0]);
_Static_assert(sizeof(engine_features) / sizeof(engine_features[0]) <= ENGINE_FEATURES_MAX,
	       "the engine's table of features on holds them all");
