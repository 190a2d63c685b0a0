#include "xgrad/nn/checkpoint.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"

namespace xgrad::nn {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is this code");

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100u << 20;  // as the reference implementation
constexpr const char* kOptimizerPrefix = "optimizer.";

// The op name errors about a checkpoint file start with.
std::string in_file(const std::string& path) { return "checkpoint '" + path + "'"; }

// Text that JSON cannot hold (not UTF-8) named, with its bad bytes shown as U+FFFD.
void check_utf8(const std::string& text, const char* what) {
  try {
    (void)json(text).dump();
  } catch (const json::type_error&) {
    fail("save", what, " ", json(text).dump(-1, ' ', false, json::error_handler_t::replace),
         " is not valid UTF-8 (safetensors headers are JSON)");
  }
}

std::size_t item_size(DType dtype) { return dtype == DType::float32 ? 4 : 8; }

// The dtypes read, and the xgrad dtype each becomes: float32 where every value of the
// type is exact in it (F16 and BF16 widen exactly; BOOL and the 8- and 16-bit integers
// fit), float64 for the wider integers (I64 and U64 values past 2^53 are checked).
struct FileDType {
  const char* name;
  std::size_t size;
  DType dtype;
  bool integer;  // BOOL included: exactness matters when it goes into float32 state
};
constexpr FileDType kFileDTypes[] = {
    {"F32", 4, DType::float32, false},  {"F64", 8, DType::float64, false}, {"F16", 2, DType::float32, false},
    {"BF16", 2, DType::float32, false}, {"BOOL", 1, DType::float32, true}, {"U8", 1, DType::float32, true},
    {"I8", 1, DType::float32, true},    {"I16", 2, DType::float32, true},  {"U16", 2, DType::float32, true},
    {"I32", 4, DType::float64, true},   {"U32", 4, DType::float64, true},  {"I64", 8, DType::float64, true},
    {"U64", 8, DType::float64, true},
};

const FileDType* find_dtype(const std::string& name) {
  for (const FileDType& d : kFileDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string dtype_list() {
  std::string names;
  for (const FileDType& d : kFileDTypes) names += std::string(names.empty() ? "" : ", ") + d.name;
  return names;
}

// IEEE half to float: every half is a float exactly.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));           // rebias 15 -> 127
}

// bfloat16 is the top half of a float.
float bfloat16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

template <class Source>
Source load_le(const char* bytes) {
  Source v;
  std::memcpy(&v, bytes, sizeof v);  // the data need not be aligned
  return v;
}

// Whether an integer survives the trip through double (with 2^63 and 2^64, which double
// holds, outside the integer types).
template <class Int>
bool exact_in_double(Int v) {
  const double d = static_cast<double>(v);
  return d < std::ldexp(1.0, std::numeric_limits<Int>::digits) && static_cast<Int>(d) == v;
}

// An entry of the header, checked: where its bytes are and what they hold.
struct Entry {
  std::string name;
  const FileDType* file_dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// The entry's bytes into t, a new tensor of its shape and xgrad dtype (every element
// written). Throws for a value that dtype cannot hold exactly (an I64 past 2^53) and for a
// BOOL byte other than 0 or 1.
void convert(const std::string& source, const Entry& e, const char* bytes, Tensor& t) {
  const std::size_t count = t.numel();
  if (count == 0) return;  // an empty tensor has no buffer
  const std::string type = e.file_dtype->name;
  const std::string where = "tensor '" + e.name + "': " + type + " value ";
  dispatch(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = t.data<T>();
    const auto each = [&]<class Source>(Source, auto to_value) {
      for (std::size_t i = 0; i < count; ++i) out[i] = to_value(load_le<Source>(bytes + i * sizeof(Source)), i);
    };
    const auto integer = [&](auto v, std::size_t i) {
      XGRAD_CHECK(exact_in_double(v), in_file(source), where, +v, " at element ", i,
                  " cannot be represented exactly in float64 (beyond 2^53)");
      return static_cast<T>(v);
    };
    if (type == "F32" || type == "F64") {
      std::memcpy(out, bytes, count * sizeof(T));
    } else if (type == "F16") {
      each(std::uint16_t{}, [](std::uint16_t h, std::size_t) { return static_cast<T>(half_to_float(h)); });
    } else if (type == "BF16") {
      each(std::uint16_t{}, [](std::uint16_t h, std::size_t) { return static_cast<T>(bfloat16_to_float(h)); });
    } else if (type == "BOOL") {
      each(std::uint8_t{}, [&](std::uint8_t b, std::size_t i) {
        XGRAD_CHECK(b <= 1, in_file(source), where, +b, " at element ", i, " is neither 0 nor 1");
        return static_cast<T>(b);
      });
    } else if (type == "U8") {
      each(std::uint8_t{}, integer);
    } else if (type == "I8") {
      each(std::int8_t{}, integer);
    } else if (type == "I16") {
      each(std::int16_t{}, integer);
    } else if (type == "U16") {
      each(std::uint16_t{}, integer);
    } else if (type == "I32") {
      each(std::int32_t{}, integer);
    } else if (type == "U32") {
      each(std::uint32_t{}, integer);
    } else if (type == "I64") {
      each(std::int64_t{}, integer);
    } else {
      each(std::uint64_t{}, integer);
    }
  });
}

Entry parse_entry(const std::string& source, const std::string& name, const json& info) {
  const auto where = "tensor '" + name + "'";
  XGRAD_CHECK(info.is_object() && info.size() == 3 && info.contains("dtype") && info.contains("shape") &&
                  info.contains("data_offsets"),
              in_file(source), where, " must have exactly dtype, shape and data_offsets");
  const json& dtype = info["dtype"];
  XGRAD_CHECK(dtype.is_string(), in_file(source), where, ": dtype is not a string");
  Entry e{name, find_dtype(dtype.get<std::string>()), {}, 0, 0};
  XGRAD_CHECK(e.file_dtype, in_file(source), where, ": unsupported dtype ", dtype.dump(), " (xgrad reads ",
              dtype_list(), ")");
  const json& shape = info["shape"];
  XGRAD_CHECK(shape.is_array(), in_file(source), where, ": shape is not a list");
  std::uint64_t count = 1;
  for (const json& d : shape) {
    XGRAD_CHECK(d.is_number_unsigned(), in_file(source), where, ": shape ", shape.dump(),
                " holds a non-natural number");
    const std::uint64_t size = d.get<std::uint64_t>();
    XGRAD_CHECK(!size || count <= std::numeric_limits<std::uint64_t>::max() / 16 / size, in_file(source), where,
                ": shape ", shape.dump(), " is impossibly large");
    count *= size;
    e.shape.push_back(static_cast<std::size_t>(size));
  }
  const json& offsets = info["data_offsets"];
  XGRAD_CHECK(
      offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
      in_file(source), where, ": data_offsets must be two natural numbers, got ", offsets.dump());
  e.begin = offsets[0].get<std::uint64_t>();
  e.end = offsets[1].get<std::uint64_t>();
  XGRAD_CHECK(e.end >= e.begin && e.end - e.begin == count * e.file_dtype->size, in_file(source), where,
              ": data_offsets ", offsets.dump(), " do not hold ", count, " ", dtype.get<std::string>(),
              " values of shape ", shape.dump());
  return e;
}

// The wide integers (I32 and up) were read into float64 exactly; those bound for float32
// state (as most models are) must be exact there too, or the load would round them
// silently.
void check_integers_fit(const SafetensorsContents& contents, const Stateful& model, const Stateful* optimizer,
                        const std::string& path) {
  std::map<std::string, DType> targets;
  for (const auto& [name, tensor] : model.state_dict()) targets.emplace(name, tensor.dtype());
  if (optimizer)
    for (const auto& [name, tensor] : optimizer->state_dict()) targets.emplace(kOptimizerPrefix + name, tensor.dtype());
  const std::string buffers = std::string(kOptimizerPrefix) + "state.";
  for (const auto& [name, tensor] : contents.tensors) {
    const auto file_dtype = contents.dtypes.find(name);
    if (file_dtype == contents.dtypes.end() || !find_dtype(file_dtype->second) ||
        !find_dtype(file_dtype->second)->integer || tensor.dtype() != DType::float64)
      continue;
    auto target = targets.find(name);
    // An optimizer's buffers it has not made yet ("optimizer.state.<param>.exp_avg") take
    // their parameter's dtype; its step counts are read as float64.
    const std::size_t dot = name.rfind('.');
    if (target == targets.end() && name.rfind(buffers, 0) == 0 && dot > buffers.size() &&
        name.substr(dot + 1) != "step")
      target = targets.find(name.substr(buffers.size(), dot - buffers.size()));
    if (target == targets.end() || target->second != DType::float32) continue;
    const double* values = tensor.data<double>();
    for (std::size_t i = 0; i < tensor.numel(); ++i)
      XGRAD_CHECK(static_cast<double>(static_cast<float>(values[i])) == values[i], in_file(path), "tensor '", name,
                  "': ", file_dtype->second, " value ", static_cast<std::int64_t>(values[i]), " at element ", i,
                  " cannot be represented exactly in the model's float32 (beyond 2^24)");
  }
}

// A file's layout: its header (the 8-byte length and the JSON, padded), then the tensors'
// bytes in this order.
struct SafetensorsLayout {
  std::string header;
  std::vector<std::pair<std::string, Tensor>> order;
};

SafetensorsLayout safetensors_layout(const StateDict& tensors, const Metadata& metadata) {
  // Wider types first, so every tensor's data starts aligned to its own size.
  std::vector<std::pair<std::string, Tensor>> order(tensors.begin(), tensors.end());
  for (const auto& [name, t] : order)
    XGRAD_CHECK(!name.empty() && name != "__metadata__" && t.defined(), "save", "invalid tensor entry '", name, "'");
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return item_size(a.second.dtype()) > item_size(b.second.dtype());
  });
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : order) {
    const std::uint64_t size = t.numel() * item_size(t.dtype());
    header[name] = {{"dtype", t.dtype() == DType::float32 ? "F32" : "F64"},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::type_error&) {  // a name or metadata text that is not UTF-8
    for (const auto& [key, value] : header.items()) {
      check_utf8(key, "tensor name");
      if (key == "__metadata__")
        for (const auto& [meta_key, meta_value] : value.items()) {
          check_utf8(meta_key, "metadata key");
          check_utf8(meta_value.get<std::string>(), "metadata value");
        }
    }
    throw;
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string bytes(8, '\0');
  const std::uint64_t length = text.size();
  std::memcpy(bytes.data(), &length, 8);
  bytes += text;
  return {std::move(bytes), std::move(order)};
}

// A tensor's bytes as the file holds them (none for an empty one, which has no buffer).
std::string_view tensor_bytes(const Tensor& t) {
  if (t.numel() == 0) return {};
  const char* data =
      dispatch(t.dtype(), [&](auto tag) { return reinterpret_cast<const char*>(t.data<decltype(tag)>()); });
  return {data, t.numel() * item_size(t.dtype())};
}

}  // namespace

std::string encode_safetensors(const StateDict& tensors, const Metadata& metadata) {
  const SafetensorsLayout layout = safetensors_layout(tensors, metadata);
  std::string bytes = layout.header;
  for (const auto& entry : layout.order) bytes += tensor_bytes(entry.second);
  return bytes;
}

SafetensorsContents decode_safetensors(std::string_view bytes, const std::string& source) {
  XGRAD_CHECK(bytes.size() >= 8, in_file(source), "only ", bytes.size(),
              " bytes, too short for the 8-byte header length");
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  XGRAD_CHECK(length <= kMaxHeader, in_file(source), "header length ", length, " is over the ", kMaxHeader >> 20,
              " MiB a safetensors header may have");
  XGRAD_CHECK(length <= bytes.size() - 8, in_file(source), "header length ", length, " runs past the end of the file (",
              bytes.size(), " bytes)");
  json header;
  try {
    // A key given twice would silently keep the last value: refuse it.
    std::vector<std::set<std::string>> keys;  // per open object
    // Nesting deeper than a safetensors header's (the header, its entries, their shapes
    // and offsets: depths 0 to 2) is refused as it starts, before a deeply nested header
    // fills the memory.
    constexpr int kDeepest = 2;
    const auto no_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
      if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth > kDeepest)
        fail(in_file(source), "the header nests deeper than a safetensors header (", kDeepest + 1, " levels)");
      if (event == json::parse_event_t::object_start) keys.emplace_back();
      if (event == json::parse_event_t::object_end) keys.pop_back();
      if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
        fail(in_file(source), "the header lists '", parsed.get<std::string>(), "' twice");
      return true;
    };
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length), no_duplicates);
  } catch (const json::exception& e) {
    fail(in_file(source), "the header is not valid JSON (", e.what(), ")");
  } catch (const std::bad_alloc&) {
    fail(in_file(source), "the header (", length, " bytes) is too large to read into memory");
  }
  XGRAD_CHECK(header.is_object(), in_file(source), "the header is not a JSON object");

  SafetensorsContents contents;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      XGRAD_CHECK(info.is_object(), in_file(source), "__metadata__ is not an object");
      for (const auto& [key, value] : info.items()) {
        XGRAD_CHECK(value.is_string(), in_file(source), "metadata '", key, "' is not a string");
        contents.metadata[key] = value.get<std::string>();
      }
    } else {
      entries.push_back(parse_entry(source, name, info));
    }
  }
  // The tensors must tile the data region exactly: no overlap, no gap, nothing after.
  const std::uint64_t data_size = bytes.size() - 8 - length;
  // By start, then end: an empty tensor [56, 56] comes before [56, 72], whatever order
  // the header lists them in (writers put empty tensors anywhere).
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t covered = 0;
  for (const Entry& e : entries) {
    XGRAD_CHECK(e.begin == covered, in_file(source), "tensor '", e.name, "' starts at byte ", e.begin,
                " of the data, expected ", covered, (e.begin < covered ? " (it overlaps another)" : " (a gap)"));
    covered = e.end;
  }
  XGRAD_CHECK(covered == data_size, in_file(source), "the tensors cover ", covered,
              " bytes of data but the file holds ", data_size);

  // The tensors are made here, filled on the pool: the copies (and the first touch of the
  // new memory) are most of a large model's load. The first bad tensor in the file's order
  // is the one reported, on any number of threads.
  const char* data = bytes.data() + 8 + length;
  std::vector<Tensor> tensors;
  for (const Entry& e : entries) tensors.push_back(Tensor::empty(e.shape, e.file_dtype->dtype));
  std::vector<std::exception_ptr> errors(entries.size());
  parallel_for(entries.size(),
               static_cast<double>(data_size) / static_cast<double>(std::max<std::size_t>(entries.size(), 1)),
               [&](std::size_t i) {
                 try {
                   convert(source, entries[i], data + entries[i].begin, tensors[i]);
                 } catch (...) {
                   errors[i] = std::current_exception();
                 }
               });
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    contents.tensors.emplace(entries[i].name, tensors[i]);
    contents.dtypes.emplace(entries[i].name, entries[i].file_dtype->name);
  }
  return contents;
}

// Written tensor by tensor from the tensors' own memory: a checkpoint needs no second
// copy of the model and its optimizer state in memory.
void write_safetensors(AtomicFileWriter& out, const StateDict& tensors, const Metadata& metadata) {
  const SafetensorsLayout layout = safetensors_layout(tensors, metadata);
  out.write(layout.header);
  for (const auto& entry : layout.order) out.write(tensor_bytes(entry.second));
}

void write_safetensors(const std::string& path, const StateDict& tensors, const Metadata& metadata) {
  AtomicFileWriter out(path, "save");
  write_safetensors(out, tensors, metadata);
  out.commit();
}

SafetensorsContents read_safetensors(const std::string& path) {
  // Mapped, not read: the tensors are copied out of the file once (a GPT-2 124M loads
  // without a second 500 MB buffer).
  const MappedFile file(path, in_file(path));
  return decode_safetensors(file.bytes(), path);
}

void save(const std::string& path, const Stateful& model, const Stateful* optimizer, const Metadata& metadata) {
  StateDict tensors = model.state_dict();
  if (optimizer)
    for (const auto& [name, tensor] : optimizer->state_dict()) {
      const bool added = tensors.emplace(kOptimizerPrefix + name, tensor).second;
      XGRAD_CHECK(added, "save", "the model already has an entry named '", kOptimizerPrefix, name, "'");
    }
  write_safetensors(path, tensors, metadata);
}

Metadata load(const std::string& path, Stateful& model, Stateful* optimizer) {
  return load(read_safetensors(path), model, optimizer, path);
}

Metadata load(const SafetensorsContents& contents, Stateful& model, Stateful* optimizer, const std::string& path) {
  StateDict model_state, optimizer_state;
  const std::string prefix = kOptimizerPrefix;
  // A name the model has is the model's, even under the optimizer's prefix (a child
  // module called "optimizer"); save() refuses the two ever meaning one entry.
  const StateDict model_entries = model.state_dict();
  for (const auto& [name, tensor] : contents.tensors) {
    if (!model_entries.contains(name) && name.rfind(prefix, 0) == 0)
      optimizer_state.emplace(name.substr(prefix.size()), tensor);
    else
      model_state.emplace(name, tensor);
  }
  XGRAD_CHECK(!optimizer || !optimizer_state.empty(), in_file(path), "holds no optimizer state");
  check_integers_fit(contents, model, optimizer, path);

  // Each load_state_dict checks before it changes anything; if the optimizer's fails
  // after the model's succeeded, put the model back.
  StateDict model_backup;
  for (const auto& [name, tensor] : model_entries) model_backup.emplace(name, tensor.clone());
  try {
    model.load_state_dict(model_state);
    if (optimizer) optimizer->load_state_dict(optimizer_state);
  } catch (const Error& e) {
    model.load_state_dict(model_backup);
    fail(in_file(path), e.what());
  }
  return contents.metadata;
}

}  // namespace xgrad::nn
