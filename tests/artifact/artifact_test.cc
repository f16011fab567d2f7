// The artifact container and manifest: round trips, and every way a file
// can be broken gives an error that says how, never a crash.
#include "tensord/artifact/artifact.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tensord {
namespace {

using ::testing::HasSubstr;

Manifest SampleManifest() {
  Manifest m;
  m.abi_version = 1;
  m.library = "mylib";
  m.ops.push_back({"mylib::f(Tensor x) -> Tensor", "return empty(x.shape)", "x: grad", "mylib_f_cpu", ""});
  m.ops.push_back({"mylib::g(Tensor x, int n) -> Tensor", "like:clone", "", "", "mylib_g_cuda"});
  m.target_triple = "x86_64-linux-gnu";
  m.glibc_versions = {"GLIBC_2.2.5"};
  m.glibcxx_versions = {"GLIBCXX_3.4"};
  m.needed = {"libc.so.6"};
  m.undefined_symbols = {"memcpy"};
  m.cuda_sm = {80, 90};
  m.cuda_ptx = {90};
  m.builder = "test";
  return m;
}

TEST(ArtifactTest, RoundTrip) {
  const std::string payload = "\x7f" "ELF pretend payload";
  const std::string file = SerializeArtifact(SampleManifest(), payload);
  absl::StatusOr<Artifact> a = ParseArtifact(file);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->payload, payload);
  EXPECT_EQ(a->manifest.library, "mylib");
  ASSERT_EQ(a->manifest.ops.size(), 2u);
  EXPECT_EQ(a->manifest.ops[0].derivative, "x: grad");
  EXPECT_EQ(a->manifest.ops[0].cpu_symbol, "mylib_f_cpu");
  EXPECT_EQ(a->manifest.ops[1].cuda_symbol, "mylib_g_cuda");
  EXPECT_EQ(a->manifest.ops[1].cpu_symbol, "");
  EXPECT_EQ(a->manifest.cuda_sm, (std::vector<int>{80, 90}));
  EXPECT_EQ(a->manifest.payload_bytes, payload.size());
  EXPECT_EQ(a->manifest.payload_sha256, Sha256Hex(payload));
  EXPECT_EQ(a->content_hash.size(), 64u);
  EXPECT_EQ(*ContentHash(file), a->content_hash);
  EXPECT_TRUE(a->signatures.empty());
}

TEST(ArtifactTest, Sha256MatchesKnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ArtifactTest, SignaturesDoNotChangeTheContentHash) {
  const std::string plain = SerializeArtifact(SampleManifest(), "payload");
  const std::string signed_file =
      SerializeArtifact(SampleManifest(), "payload", {{"ops-team", std::string(64, '\x5a')}});
  absl::StatusOr<Artifact> a = ParseArtifact(signed_file);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->signatures.size(), 1u);
  EXPECT_EQ(a->signatures[0].key_name, "ops-team");
  EXPECT_EQ(a->signatures[0].signature, std::string(64, '\x5a'));
  EXPECT_EQ(a->content_hash, *ContentHash(plain));
}

TEST(ArtifactTest, EveryTruncationIsAnError) {
  const std::string file = SerializeArtifact(SampleManifest(), std::string(1000, 'p'));
  for (size_t n = 0; n < file.size(); n += 7) {
    absl::StatusOr<Artifact> a = ParseArtifact(file.substr(0, n));
    EXPECT_FALSE(a.ok()) << "accepted a file cut to " << n << " bytes";
  }
  EXPECT_THAT(ParseArtifact(file.substr(0, 100)).status().message(), HasSubstr("truncated"));
  EXPECT_THAT(ParseArtifact("").status().message(), HasSubstr("not a tensord kernel artifact"));
}

TEST(ArtifactTest, AlteredPayloadIsRefusedByHash) {
  std::string file = SerializeArtifact(SampleManifest(), std::string(1000, 'p'));
  file[file.size() - 10] = 'q';
  absl::StatusOr<Artifact> a = ParseArtifact(file);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("SHA-256"));
  EXPECT_THAT(a.status().message(), HasSubstr("corrupt or was altered"));
  // The manifest alone still reads (a client registers ops from it).
  EXPECT_TRUE(ParseManifestOnly(file).ok());
}

TEST(ArtifactTest, NewerFormatIsRefusedNamingBothVersions) {
  std::string file = SerializeArtifact(SampleManifest(), "x");
  file[8] = 3;
  absl::StatusOr<Artifact> a = ParseArtifact(file);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("format version 3 is newer than this tensord reads"));
}

TEST(ArtifactTest, ManifestFieldErrorsNameTheField) {
  EXPECT_THAT(ManifestFromJson("{").status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(ManifestFromJson("[]").status().message(), HasSubstr("not a JSON object"));
  std::string json = ManifestToJson(SampleManifest());
  absl::StatusOr<Manifest> ok = ManifestFromJson(json);
  ASSERT_TRUE(ok.ok()) << ok.status();
  // A schema that is a number.
  std::string bad = json;
  const size_t at = bad.find("\"mylib::f(Tensor x) -> Tensor\"");
  bad.replace(at, std::string("\"mylib::f(Tensor x) -> Tensor\"").size(), "42");
  EXPECT_THAT(ManifestFromJson(bad).status().message(), HasSubstr("field 'schema' must be a string"));
  EXPECT_THAT(ManifestFromJson(R"({"format_version": -1})").status().message(),
              HasSubstr("field 'format_version' must be a non-negative integer"));
}

TEST(ArtifactTest, AlteredHeaderOrManifestNeverPassesAsTheOriginal) {
  const std::string file = SerializeArtifact(SampleManifest(), std::string(300, 'p'));
  const std::string original = *ContentHash(file);
  // Flip each byte of the header and manifest in turn: the result is an
  // error, or (a flip inside a string of the manifest) an artifact with
  // another content hash, so an allow-list entry never covers it.
  int refused = 0;
  for (size_t i = 0; i < file.size() - 300; ++i) {
    std::string f = file;
    f[i] = static_cast<char>(f[i] ^ 0x41);
    absl::StatusOr<Artifact> a = ParseArtifact(f);
    if (!a.ok()) {
      ++refused;
      continue;
    }
    EXPECT_NE(a->content_hash, original) << "byte " << i;
  }
  EXPECT_GT(refused, 24);  // at least every header byte but the unused high ones
}

}  // namespace
}  // namespace tensord
