#pragma once
// Everything in optim/ at once.

#include "xgrad/optim/adam.hpp"
#include "xgrad/optim/clip.hpp"
#include "xgrad/optim/optimizer.hpp"
#include "xgrad/optim/schedule.hpp"
#include "xgrad/optim/sgd.hpp"
