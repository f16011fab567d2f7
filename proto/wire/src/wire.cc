// wire: conversions between tensord.v1 messages and meta's types. Everything
// decoded here comes from a peer and is treated as hostile: enums are range
// checked before they become enums, and metadata is validated.
#include "tensord/wire/wire.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tensord/meta/device.h"
#include "tensord/meta/dtype.h"

namespace tensord::wire {
namespace {

absl::string_view ArgTypeText(const Argument& a) {
  switch (a.type) {
    case ArgType::kTensor: return "Tensor";
    case ArgType::kTensorList: return "Tensor[]";
    case ArgType::kOptionalTensorList: return "Tensor?[]";
    case ArgType::kScalar: return "Scalar";
    case ArgType::kInt: return "int";
    case ArgType::kIntList: return "int[]";
    case ArgType::kFloat: return "float";
    case ArgType::kFloatList: return "float[]";
    case ArgType::kBool: return "bool";
    case ArgType::kString: return "str";
    case ArgType::kDtype: return "ScalarType";
    case ArgType::kDevice: return "Device";
  }
  return "?";
}

absl::string_view WireKindName(v1::Value::KindCase k) {
  switch (k) {
    case v1::Value::kNone: return "None";
    case v1::Value::kTensor: return "Tensor";
    case v1::Value::kTensorList: return "Tensor list";
    case v1::Value::kB: return "bool";
    case v1::Value::kI: return "int";
    case v1::Value::kF: return "float";
    case v1::Value::kIntList: return "int list";
    case v1::Value::kFloatList: return "float list";
    case v1::Value::kS: return "str";
    case v1::Value::kDtype: return "ScalarType";
    case v1::Value::kDevice: return "Device";
    case v1::Value::KIND_NOT_SET: return "nothing";
  }
  return "unknown";
}

absl::Status WrongKind(absl::string_view op, const Argument& arg, const v1::Value& v) {
  return TypeErr(absl::StrCat(op, ": argument '", arg.name, "' expected ", arg.optional ? "None or " : "",
                              ArgTypeText(arg), ", got ", WireKindName(v.kind_case())));
}

ErrorKind ParseKindName(absl::string_view name) {
  for (ErrorKind k : {ErrorKind::kRuntime, ErrorKind::kType, ErrorKind::kIndex, ErrorKind::kNotImplemented,
                      ErrorKind::kOutOfMemory, ErrorKind::kInternal}) {
    if (ErrorKindName(k) == name) return k;
  }
  return ErrorKind::kRuntime;
}

}  // namespace

void ToProto(const TensorMeta& m, v1::TensorMetaProto* out) {
  out->Clear();
  out->mutable_sizes()->Reserve(static_cast<int>(m.sizes.size()));
  for (int64_t s : m.sizes) out->add_sizes(s);
  out->mutable_strides()->Reserve(static_cast<int>(m.strides.size()));
  for (int64_t s : m.strides) out->add_strides(s);
  out->set_storage_offset(m.storage_offset);
  out->set_dtype(static_cast<int32_t>(m.dtype));
  out->set_device_type(static_cast<int32_t>(m.device.type));
  out->set_device_index(m.device.index);
}

absl::StatusOr<TensorMeta> FromProto(const v1::TensorMetaProto& p, absl::string_view what) {
  // Range checks before anything becomes an enum or a vector of a peer-chosen size.
  if (p.sizes_size() > 64) return RuntimeErr(absl::StrCat(what, ": rank ", p.sizes_size(), " exceeds 64"));
  if (p.sizes_size() != p.strides_size()) {
    return RuntimeErr(absl::StrCat(what, ": ", p.sizes_size(), " sizes but ", p.strides_size(), " strides"));
  }
  if (!IsValidScalarType(p.dtype())) {
    return RuntimeErr(absl::StrCat(what, ": invalid dtype ", p.dtype(), " (expected 0..", kNumScalarTypes - 1, ")"));
  }
  if (!IsValidDeviceType(p.device_type())) {
    return RuntimeErr(
        absl::StrCat(what, ": invalid device type ", p.device_type(), " (expected 0..", kNumDeviceTypes - 1, ")"));
  }
  if (p.device_index() < 0) return RuntimeErr(absl::StrCat(what, ": negative device index ", p.device_index()));
  TensorMeta m;
  m.sizes.assign(p.sizes().begin(), p.sizes().end());
  m.strides.assign(p.strides().begin(), p.strides().end());
  m.storage_offset = p.storage_offset();
  m.dtype = static_cast<ScalarType>(p.dtype());
  m.device = Device{static_cast<DeviceType>(p.device_type()), p.device_index()};
  if (!m.device.indexed() && m.device.index != 0) {
    return RuntimeErr(absl::StrCat(what, ": device index ", m.device.index, " given for device type ",
                                   m.device.type == DeviceType::kCPU ? "cpu" : "meta"));
  }
  TD_RETURN_IF_ERROR(m.Validate(what));
  return m;
}

absl::Status EncodeValue(const Value& v, absl::FunctionRef<uint64_t(const TensorMeta*)> handle_of, v1::Value* out) {
  out->Clear();
  switch (v.kind()) {
    case Value::Kind::kNone:
      out->set_none(true);
      break;
    case Value::Kind::kTensor: {
      const uint64_t h = v.tensor_ptr() ? handle_of(v.tensor_ptr()) : 0;
      if (h == 0) return InternalErr("EncodeValue: a tensor argument has no handle");
      out->set_tensor(h);
      break;
    }
    case Value::Kind::kTensorList: {
      v1::HandleList* l = out->mutable_tensor_list();
      for (const TensorMeta* t : v.tensor_list()) {
        uint64_t h = 0;
        if (t != nullptr) {
          h = handle_of(t);
          if (h == 0) return InternalErr("EncodeValue: a tensor in a list argument has no handle");
        }
        l->add_handles(h);
      }
      break;
    }
    case Value::Kind::kScalar: {
      const Scalar s = v.scalar();
      if (s.is_bool()) {
        out->set_b(s.to_bool());
      } else if (s.is_int()) {
        out->set_i(s.to_int());
      } else {
        out->set_f(s.to_double());
      }
      break;
    }
    case Value::Kind::kInt:
      out->set_i(v.to_int());
      break;
    case Value::Kind::kFloat:
      out->set_f(v.to_double());
      break;
    case Value::Kind::kBool:
      out->set_b(v.to_bool());
      break;
    case Value::Kind::kIntList: {
      v1::IntList* l = out->mutable_int_list();
      for (int64_t x : v.int_list()) l->add_values(x);
      break;
    }
    case Value::Kind::kFloatList: {
      v1::FloatList* l = out->mutable_float_list();
      for (double x : v.float_list()) l->add_values(x);
      break;
    }
    case Value::Kind::kString:
      out->set_s(v.str());
      break;
    case Value::Kind::kDtype:
      out->set_dtype(static_cast<int32_t>(v.dtype()));
      break;
    case Value::Kind::kDevice:
      out->set_device(v.device().ToString());
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> DecodeValue(absl::string_view op, const Argument& arg, const v1::Value& v,
                                  const std::function<absl::StatusOr<const TensorMeta*>(uint64_t)>& lookup) {
  using K = v1::Value::KindCase;
  const K kind = v.kind_case();
  if (kind == K::KIND_NOT_SET) {
    return TypeErr(absl::StrCat(op, ": argument '", arg.name, "' has no value"));
  }
  if (kind == K::kNone) {
    if (arg.optional) return Value();
    return WrongKind(op, arg, v);
  }
  switch (arg.type) {
    case ArgType::kTensor: {
      if (kind != K::kTensor) return WrongKind(op, arg, v);
      if (v.tensor() == 0) {
        if (arg.optional) return Value();
        return TypeErr(absl::StrCat(op, ": argument '", arg.name, "' expected Tensor, got handle 0 (None)"));
      }
      TD_ASSIGN_OR_RETURN(const TensorMeta* m, lookup(v.tensor()));
      return Value(m);
    }
    case ArgType::kTensorList:
    case ArgType::kOptionalTensorList: {
      if (kind != K::kTensorList) return WrongKind(op, arg, v);
      const bool allow_none = arg.type == ArgType::kOptionalTensorList;
      TensorList list;
      list.reserve(v.tensor_list().handles_size());
      for (int i = 0; i < v.tensor_list().handles_size(); ++i) {
        const uint64_t h = v.tensor_list().handles(i);
        if (h == 0) {
          if (!allow_none) {
            return TypeErr(absl::StrCat(op, ": argument '", arg.name, "' expected Tensor[], got None at index ", i));
          }
          list.push_back(nullptr);
          continue;
        }
        TD_ASSIGN_OR_RETURN(const TensorMeta* m, lookup(h));
        list.push_back(m);
      }
      return Value(std::move(list));
    }
    case ArgType::kScalar:
      if (kind == K::kB) return Value(Scalar::Bool(v.b()));
      if (kind == K::kI) return Value(Scalar::Int(v.i()));
      if (kind == K::kF) return Value(Scalar::Float(v.f()));
      return WrongKind(op, arg, v);
    case ArgType::kInt:
      if (kind == K::kI) return Value(static_cast<int64_t>(v.i()));
      return WrongKind(op, arg, v);
    case ArgType::kIntList:
      if (kind == K::kIntList) {
        return Value(Shape(v.int_list().values().begin(), v.int_list().values().end()));
      }
      if (kind == K::kI) {
        // `int[N] x` accepts a single int, repeated N times (PyTorch: `dim=1` for `int[1] dim`).
        return Value(Shape(arg.fixed_len > 1 ? arg.fixed_len : 1, v.i()));
      }
      return WrongKind(op, arg, v);
    case ArgType::kFloat:
      if (kind == K::kF) return Value(v.f());
      if (kind == K::kI) return Value(static_cast<double>(v.i()));
      return WrongKind(op, arg, v);
    case ArgType::kFloatList:
      if (kind == K::kFloatList) {
        return Value(std::vector<double>(v.float_list().values().begin(), v.float_list().values().end()));
      }
      if (kind == K::kIntList) {
        return Value(std::vector<double>(v.int_list().values().begin(), v.int_list().values().end()));
      }
      return WrongKind(op, arg, v);
    case ArgType::kBool:
      if (kind == K::kB) return Value(v.b());
      return WrongKind(op, arg, v);
    case ArgType::kString:
      if (kind == K::kS) return Value(v.s());
      return WrongKind(op, arg, v);
    case ArgType::kDtype:
      if (kind != K::kDtype) return WrongKind(op, arg, v);
      if (!IsValidScalarType(v.dtype())) {
        return RuntimeErr(absl::StrCat(op, ": argument '", arg.name, "': ", v.dtype(),
                                       " is not a valid dtype (expected 0..", kNumScalarTypes - 1, ")"));
      }
      return Value(static_cast<ScalarType>(v.dtype()));
    case ArgType::kDevice: {
      if (kind != K::kDevice) return WrongKind(op, arg, v);
      absl::StatusOr<Device> d = ParseDevice(v.device());
      if (!d.ok()) return RuntimeErr(absl::StrCat(op, ": argument '", arg.name, "': ", d.status().message()));
      return Value(*d);
    }
  }
  return InternalErr(absl::StrCat(op, ": argument '", arg.name, "' has an unknown schema type"));
}

std::string ValidUtf8(absl::string_view text) {
  // Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
  // U+10FFFF) is kept; each byte of anything else becomes U+FFFD.
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      len = 1;
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out.append(text.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

void ToProto(const absl::Status& s, absl::string_view op, uint64_t call_id, absl::string_view call_site,
             v1::Error* out) {
  out->Clear();
  out->set_kind(std::string(ErrorKindName(KindOf(s))));
  // Proto3 strings must be UTF-8, or the client cannot parse the message
  // at all: an error's text can hold bytes from anywhere (a kernel
  // artifact's message, a file name).
  out->set_message(ValidUtf8(s.message()));
  out->set_op(ValidUtf8(op));
  out->set_call_id(call_id);
  out->set_call_site(ValidUtf8(call_site));
}

absl::Status FromProto(const v1::Error& e) {
  const ErrorKind kind = ParseKindName(e.kind());
  std::string prefix;
  absl::string_view message = e.message();
  if (!e.op().empty()) {
    // The prefix names the op: a message that names it again as its start
    // ("index_put(): index 3 is out of bounds", "select: ...") drops that.
    const absl::string_view op = e.op();
    const absl::string_view base = op.substr(0, op.find('.'));
    for (absl::string_view name : {op, base}) {
      for (absl::string_view sep : {"(): ", ": "}) {
        if (absl::StartsWith(message, absl::StrCat(name, sep)) && message.size() > name.size() + sep.size()) {
          message.remove_prefix(name.size() + sep.size());
        }
      }
    }
    prefix = e.op();
    if (e.call_id() != 0 && !e.call_site().empty()) {
      absl::StrAppend(&prefix, " (call ", e.call_id(), " at ", e.call_site(), ")");
    } else if (e.call_id() != 0) {
      absl::StrAppend(&prefix, " (call ", e.call_id(), ")");
    } else if (!e.call_site().empty()) {
      absl::StrAppend(&prefix, " (at ", e.call_site(), ")");
    }
    absl::StrAppend(&prefix, ": ");
  } else if (!e.call_site().empty()) {
    prefix = absl::StrCat(e.call_site(), ": ");
  }
  return MakeError(kind, absl::StrCat(prefix, message));
}

}  // namespace tensord::wire
