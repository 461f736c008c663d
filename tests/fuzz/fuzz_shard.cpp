// Fuzzes merge's reading of shard folders without touching the disk: the input is up to two shards, each
// its shard.json and its results.jsonl, the four texts separated by NUL bytes (an odd count of texts asks
// for a partial merge). analysis::merge_shard_texts parses and cross-checks them (counts, settings, units,
// mechanisms, record keys) and renders the merged results.jsonl and summary.csv; a hostile shard may only
// ever be refused with InputError (docs/security.md, "Batch and merge").
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/batch_store.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> parts;
    std::size_t pos = 0;
    while (parts.size() < 4) {
        const std::size_t nul = text.find('\0', pos);
        parts.emplace_back(text.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos));
        if (nul == std::string_view::npos)
            break;
        pos = nul + 1;
    }
    std::vector<attnscope::analysis::ShardText> shards;
    for (std::size_t i = 0; i < parts.size(); i += 2)
        shards.push_back({"s" + std::to_string(i / 2), parts[i], i + 1 < parts.size() ? parts[i + 1] : std::string()});
    try {
        (void)attnscope::analysis::merge_shard_texts(shards, parts.size() % 2 == 1);
    } catch (const attnscope::InputError&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
